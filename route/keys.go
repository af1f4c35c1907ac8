package route

import "github.com/danmaku/danmaku"

// Key builders. Every key of the service is built here. The part in braces is
// a Redis Cluster hash tag: all keys of one room share a slot, so the per-room
// Lua scripts run on a cluster as on a single server.
//
// Callers validate ids first (checkIDs); the builders only concatenate.

func roomConnectionsKey(room string) string { return "room:connections:{" + room + "}" }
func roomCometsKey(room string) string      { return "room:comets:{" + room + "}" }
func connectionInfoKey(conn string) string  { return "connection:info:{" + conn + "}" }
func userOnlineKey(user string) string      { return "user:online:{" + user + "}" }
func cometKey(comet string) string          { return "comet:{" + comet + "}" }
func cometConnectionsKey(comet string) string {
	return "comet:connections:{" + comet + "}"
}
func processedKey(room, msgID string) string { return "msg:processed:{" + room + "}:" + msgID }
func cooldownKey(room string) string         { return "room:cooldown:{" + room + "}" }
func lockKey(room string) string             { return "lock:broadcast:{" + room + "}" }
func rateKey(user string) string             { return "ratelimit:user:{" + user + "}" }
func timelineKey(room string) string         { return "room:timeline:{" + room + "}" }
func historyKey(room string) string          { return "room:history:{" + room + "}" }

// cometsIndexKey is the set of comet ids that ever took a lease and have not
// been removed; liveness itself is the existence of comet:{id}.
const cometsIndexKey = "comets:index"

// checkIDs validates pairs of (field, id) and returns the first error.
func checkIDs(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := danmaku.CheckID(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}
