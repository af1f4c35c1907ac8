package danmaku

import "encoding/json"

// The bodies of logic's HTTP API (docs/integrate.md): what logic decodes
// and answers, and what clients (the Go client package among them) send
// and decode.

// SendRequest is the body of POST /logic/send.
type SendRequest struct {
	RoomID   string        `json:"roomId"`
	UserID   int64         `json:"userId"`
	UserName string        `json:"userName"`
	Messages []SendMessage `json:"messages"`
	// Priority is the lane of every message of the request: PriorityHigh
	// only for a sender allowed to (a token with the moderator or priority
	// role, or POST /logic/admin/send); absent means normal.
	Priority Priority `json:"priority,omitempty"`
}

// SendMessage is one comment of a SendRequest. MsgID is the client's
// optional idempotency key.
type SendMessage struct {
	Content string `json:"content"`
	MsgID   string `json:"msgId,omitempty"`
}

// SendResponse is the 202 answer: the id of every message, in request
// order.
type SendResponse struct {
	MsgIDs []string `json:"msgIds"`
	// Held lists the ids of MsgIDs held for review (the room's review
	// mode and a blocked word): accepted, and shown once a moderator
	// approves them. Absent when none is.
	Held []string `json:"held,omitempty"`
}

// ReviewItem is a comment held for review in its room's queue: the
// message as it would go out, and the blocked word it matched.
type ReviewItem struct {
	ID      string `json:"id"`
	UID     int64  `json:"uid"`
	Name    string `json:"name"`
	Content string `json:"content"`
	TS      int64  `json:"ts"`
	Word    string `json:"word"`
}

// ReviewResponse is the answer of GET /logic/admin/review: the room's
// queue, oldest first.
type ReviewResponse struct {
	RoomID string       `json:"roomId"`
	Items  []ReviewItem `json:"items"`
}

// AdminRequest is the body of every admin route; each uses the fields it
// needs and refuses none of the others.
type AdminRequest struct {
	UserID int64 `json:"userId,omitempty"`
	// RoomID is the room of a mute (empty: everywhere), of a ban, or of
	// the messages to delete.
	RoomID string `json:"roomId,omitempty"`
	// Duration of a mute or a ban, Go syntax ("90s", "10m", "24h").
	Duration string `json:"duration,omitempty"`
	// IDs are the ids of the messages to delete, as viewers got them.
	IDs []string `json:"ids,omitempty"`
	// StreamID names the stream a stream/start starts (empty: a new id)
	// or a stream/end ends (empty: the room's live stream).
	StreamID string `json:"streamId,omitempty"`
	// Actor names the moderator for the log (the secret is shared, so
	// this is what tells moderators apart); empty logs "unnamed".
	Actor string `json:"actor,omitempty"`
	// The room modes a room settings change sets (RoomState); absent ones
	// stay as they are.
	SlowSeconds   *int  `json:"slowSeconds,omitempty"`
	MembersOnly   *bool `json:"membersOnly,omitempty"`
	UniqueSeconds *int  `json:"uniqueSeconds,omitempty"`
	DelaySeconds  *int  `json:"delaySeconds,omitempty"`
	Review        *bool `json:"review,omitempty"`
	// Content is the text a pin pins (instead of a message of IDs);
	// Amount what a pinned paid message paid, which pins it longer.
	Content string `json:"content,omitempty"`
	Amount  int64  `json:"amount,omitempty"`
	// Words are the blocked words a words/add or words/remove edits (of
	// the room, or the global list without roomId); Mode the mode they
	// get: reject (the default) or review.
	Words []string `json:"words,omitempty"`
	Mode  string   `json:"mode,omitempty"`
}

// AdminResponse is the 200 answer of an admin route.
type AdminResponse struct {
	Action string `json:"action"`
	UserID int64  `json:"userId,omitempty"`
	RoomID string `json:"roomId,omitempty"`
	// Until is when a mute or a ban ends (Unix milliseconds).
	Until int64 `json:"until,omitempty"`
	// Removed says whether unmute or unban found something to lift.
	Removed *bool `json:"removed,omitempty"`
	// IDs are the messages a delete removes, Found their number, Missing
	// the ids asked for that are no message of the room (never sent there,
	// already deleted, or older than the history holds); EventID names its
	// event (in job's and the comets' logs).
	IDs     []string `json:"ids,omitempty"`
	Found   int      `json:"found,omitempty"`
	Missing []string `json:"missing,omitempty"`
	EventID string   `json:"eventId,omitempty"`
	// StreamID and At are the stream a stream/start or stream/end acted
	// on (empty for an end of whatever stream is live) and when, Unix
	// milliseconds: comments accepted from then on belong to it.
	StreamID string `json:"streamId,omitempty"`
	At       int64  `json:"at,omitempty"`
	// Mode and Words describe the blocked-word list after a reload.
	Mode  string `json:"mode,omitempty"`
	Words *int   `json:"words,omitempty"`
	// State is the room's settings after a room settings change.
	State *RoomState `json:"state,omitempty"`
	// Pin is the pin a pin action made.
	Pin *Pin `json:"pin,omitempty"`
	// Approved and Rejected count the ids of a review approve or reject
	// that were in the room's queue (the others were approved, rejected or
	// expired before).
	Approved *int `json:"approved,omitempty"`
	Rejected *int `json:"rejected,omitempty"`
}

// HistoryResponse is the answer of GET /logic/history: the room's stored
// messages with their positions, oldest first, and the room's timeline
// (Epoch, Pos: its last position).
//
// A room without history has epoch "", pos 0 and no messages. A message a
// moderator deleted keeps its position and is left out, so positions may
// skip; Through is the last position the answer covers, deleted ones
// included (0 when it covers none): the since of the next page. More is
// true when the answer was cut by logic.history_max_bytes before limit
// messages: the rest follows from since=Through.
type HistoryResponse struct {
	RoomID   string    `json:"roomId"`
	Epoch    string    `json:"epoch"`
	Pos      int64     `json:"pos"`
	Through  int64     `json:"through"`
	More     bool      `json:"more,omitempty"`
	Messages []Message `json:"messages"`
}

// NoticeRequest is the body of POST /logic/push/user and, without UserID,
// of POST /logic/broadcast.
type NoticeRequest struct {
	UserID   int64           `json:"userId,omitempty"`
	Messages []NoticeMessage `json:"messages"`
}

// NoticeMessage is one message of a NoticeRequest: content, data or both;
// MsgID is the client's optional idempotency key.
type NoticeMessage struct {
	Content string          `json:"content,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	MsgID   string          `json:"msgId,omitempty"`
}

// RoomResponse is the answer of GET /logic/room: the room's settings as
// the logic that answers applies them to sends.
type RoomResponse struct {
	RoomID string    `json:"roomId"`
	State  RoomState `json:"state"`
}

// AuditEntry is one admin action of the audit log: when (TS, Unix ms),
// who (Actor: the admin request's actor, or "user:<id>" for a moderator
// token), what (Action, an admin route's action) and on what.
type AuditEntry struct {
	TS       int64      `json:"ts"`
	Actor    string     `json:"actor"`
	Action   string     `json:"action"`
	RoomID   string     `json:"roomId,omitempty"`
	UserID   int64      `json:"userId,omitempty"`
	Duration string     `json:"duration,omitempty"`
	IDs      []string   `json:"ids,omitempty"`
	EventID  string     `json:"eventId,omitempty"`
	State    *RoomState `json:"state,omitempty"`
	// Words and Mode are what a blocked-words edit added or removed.
	Words []string `json:"words,omitempty"`
	Mode  string   `json:"mode,omitempty"`
}

// HeldItem is a comment a room's delay holds (RoomState.DelaySeconds):
// the message, and when it is released to viewers (Unix ms).
type HeldItem struct {
	ID        string `json:"id"`
	UID       int64  `json:"uid"`
	Name      string `json:"name"`
	Content   string `json:"content"`
	TS        int64  `json:"ts"`
	ReleaseAt int64  `json:"releaseAt"`
}

// HeldResponse is the answer of GET /logic/admin/held: the room's held
// comments, soonest released first.
type HeldResponse struct {
	RoomID string     `json:"roomId"`
	Items  []HeldItem `json:"items"`
}

// WordsResponse is the answer of GET /logic/admin/words: the edited
// blocked words of a room (RoomID set) or the global ones, sorted, each
// with its mode.
type WordsResponse struct {
	RoomID string      `json:"roomId,omitempty"`
	Words  []WordEntry `json:"words"`
}

// WordEntry is one edited blocked word and its mode (reject or review).
type WordEntry struct {
	Word string `json:"word"`
	Mode string `json:"mode"`
}

// AuditResponse is the answer of GET /logic/admin/audit, newest first.
type AuditResponse struct {
	Entries []AuditEntry `json:"entries"`
}

// ListsResponse is the answer of GET /logic/admin/lists: what is in force
// in a room (RoomID set) or in the whole service (RoomID absent). Settings
// are the room's (the zero state, ver 0, for a room never set; null for
// the service); Mutes and Bans the active ones, soonest to end first (for
// the service: mutes everywhere, without roomId, and every room's, with
// it); Hidden the room's hidden users (shadow hide; always empty for the
// service); Pin the room's pin while it lasts, else null.
type ListsResponse struct {
	RoomID   string       `json:"roomId,omitempty"`
	Settings *RoomState   `json:"settings"`
	Mutes    []Sanctioned `json:"mutes"`
	Bans     []Sanctioned `json:"bans"`
	Hidden   []Sanctioned `json:"hidden"`
	Pin      *Pin         `json:"pin"`
}

// Sanctioned is one user under a mute, a ban or a hide until Until (Unix
// ms); RoomID names the room in a list of the whole service (absent for a
// mute everywhere).
type Sanctioned struct {
	User   int64  `json:"user"`
	RoomID string `json:"roomId,omitempty"`
	Until  int64  `json:"until"`
}

// RoomsResponse is the answer of GET /logic/admin/rooms: rooms with their
// viewers, most viewers first.
type RoomsResponse struct {
	Rooms []RoomLoad `json:"rooms"`
}

// RoomLoad is one room of RoomsResponse: its viewers and where its
// timeline stands (Epoch, Pos: the last position given). Pos grows by one
// per message, so two reads of one epoch give the room's messages a
// second.
type RoomLoad struct {
	RoomID string `json:"roomId"`
	Online int64  `json:"online"`
	Epoch  string `json:"epoch,omitempty"`
	Pos    int64  `json:"pos"`
}

// OnlineResponse is the answer of GET /logic/online.
type OnlineResponse struct {
	RoomID string `json:"roomId"`
	Online int64  `json:"online"`
}

// ErrorBody is the JSON body of every HTTP error answer of every listener:
// {"error":{"code":"invalid_argument","field":"messages[0].content","message":"..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody: one of the codes of error.go,
// the input it is about (may be empty) and a text for humans.
type ErrorDetail struct {
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// VODStreamsResponse is the answer of GET /logic/vod/streams: a room's
// streams, newest first.
type VODStreamsResponse struct {
	RoomID  string      `json:"roomId"`
	Streams []VODStream `json:"streams"`
}

// VODStream is one stream (a live session) of a room. Start and End are
// Unix milliseconds; End is absent while it is live. Segments is the
// number of segments (SegmentMS each) its offsets span so far.
type VODStream struct {
	ID       string `json:"id"`
	Start    int64  `json:"start"`
	End      int64  `json:"end,omitempty"`
	Live     bool   `json:"live,omitempty"`
	Count    int64  `json:"count"`
	Segments int    `json:"segments"`
}

// VODSegmentMS is the span of a replay segment: 6 minutes of offsets.
const VODSegmentMS = 6 * 60 * 1000

// VODSegmentResponse is the answer of GET /logic/vod/segment: the
// visible comments of a stream with offsets in [From, To), by offset.
// Omitted counts the comments left out by the segment cap (a deterministic
// sample; priority and moderator comments are always kept). Final says the
// stream ended, so the answer never changes.
type VODSegmentResponse struct {
	RoomID   string       `json:"roomId"`
	StreamID string       `json:"streamId"`
	Seg      int          `json:"seg"`
	From     int64        `json:"from"`
	To       int64        `json:"to"`
	Final    bool         `json:"final"`
	Omitted  int          `json:"omitted"`
	Comments []VODComment `json:"comments"`
}

// VODComment is a comment of a replay: Offset is milliseconds from the
// stream's start; Flags has bit 1 for a high-priority comment and bit 2
// for a moderator's; Pos is the position viewers saw it at in the room's
// live timeline (absent when it is not known: a comment job did not
// deliver) and Epoch the timeline epoch that position belongs to: a
// timeline that started over (Redis emptied, the room silent past its
// history's TTL) numbers its positions from 1 again in a new epoch, so a
// position names a comment only together with its epoch (absent with the
// position, and for positions stored before epochs were).
type VODComment struct {
	ID      string `json:"id"`
	UID     int64  `json:"uid"`
	Name    string `json:"name,omitempty"`
	Content string `json:"content"`
	Offset  int64  `json:"offset"`
	Flags   int16  `json:"flags,omitempty"`
	Pos     int64  `json:"pos,omitempty"`
	Epoch   string `json:"epoch,omitempty"`
}

// VODDensityResponse is the answer of GET /logic/vod/density: the number
// of visible comments per bucket of BucketMS milliseconds of offset, from
// offset 0, for the energy curve over the progress bar.
type VODDensityResponse struct {
	RoomID   string  `json:"roomId"`
	StreamID string  `json:"streamId"`
	BucketMS int64   `json:"bucketMs"`
	Final    bool    `json:"final"`
	Counts   []int64 `json:"counts"`
}
