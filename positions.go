package danmaku

import (
	"encoding/json"
)

// PositionsVersion is the version of Positions records this build writes.
const PositionsVersion = 1

// Positions is a record of the positions topic (job.positions_topic):
// after job delivered a batch of a room to its comets it says which
// timeline positions the batch's messages were given, so that consumers of
// the room topic that keep the comments (the archive) can store each with
// the position viewers saw. The record key is the room id, as on the room
// topic; the topic has as many partitions as the room topic, so a room's
// positions share the partition number of its messages.
//
// A batch's positions are consecutive: IDs[i] has position Pos+i in the
// room's timeline Epoch. A message delivered again (a redelivery, a retry)
// comes again with the same position; one delivered in a new epoch comes
// with its new position.
type Positions struct {
	V     int      `json:"v"`
	Room  string   `json:"room"`
	Epoch string   `json:"epoch"`
	Pos   int64    `json:"pos"`
	IDs   []string `json:"ids"`
}

// MarshalPositions encodes a Positions record.
func MarshalPositions(p Positions) ([]byte, error) {
	p.V = PositionsVersion
	return json.Marshal(p)
}

// UnmarshalPositions decodes and checks a Positions record: an EINVALID
// error for one that cannot be decoded, comes from a newer writer or has an
// invalid room, no ids or a position below 1.
func UnmarshalPositions(b []byte) (Positions, error) {
	var p Positions
	if err := json.Unmarshal(b, &p); err != nil {
		return p, Errorf(EINVALID, "positions", "decode positions: %v", err)
	}
	switch {
	case p.V < 1 || p.V > PositionsVersion:
		return p, Errorf(EINVALID, "positions.v", "unsupported positions version %d", p.V)
	case len(p.IDs) == 0:
		return p, Errorf(EINVALID, "positions.ids", "no ids")
	case p.Pos < 1:
		return p, Errorf(EINVALID, "positions.pos", "position %d below 1", p.Pos)
	}
	return p, CheckID("positions.room", p.Room)
}
