package danmaku

import "encoding/json"

// Ops of the frames that carry notices.
const (
	// OpUser is the frame of notices to one user: every connection of the
	// user receives it, whatever rooms it is in.
	OpUser = "user"
	// OpAll is the frame of broadcast notices: every connection receives
	// it.
	OpAll = "all"
)

// BroadcastKey is the Kafka record key of broadcast notices. Room ids
// cannot hold ':', so no room shares it, nor a user's key (UserKey).
const BroadcastKey = "broadcast:all"

// UserKey is the Kafka record key of notices to user: all of them go to
// one partition, in order.
func UserKey(user string) string { return "user:" + user }

// Notice is a message to one user or to every viewer: "your comment was
// removed", "you received a gift", a site announcement. It has no room and
// no position; it carries text (Content), a JSON object for the page's own
// use (Data), or both. Its JSON form is what viewers receive in user and
// all frames.
type Notice struct {
	// ID is unique per notice and stable across redeliveries, like a
	// message id; job dedups on it, comets and clients drop a repeat.
	ID string `json:"id"`
	// TS is the server time in Unix milliseconds at which logic accepted it.
	TS      int64           `json:"ts"`
	Content string          `json:"content,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// NoticeFrame is a frame of notices as viewers receive it, oldest first:
// {"op":"user","msgs":[...]} or {"op":"all","msgs":[...]}.
type NoticeFrame struct {
	Op   string   `json:"op"`
	Msgs []Notice `json:"msgs"`
}

// UserNotices are the notices of one user in a NoticePush.
type UserNotices struct {
	User string   `json:"user"`
	Msgs []Notice `json:"msgs"`
}

// NoticePush is what job pushes to a comet: with op "user", the notices of
// each user who has a connection there; with op "all", Msgs for every
// connection (the body is then exactly the all frame).
type NoticePush struct {
	Op    string        `json:"op"`
	Users []UserNotices `json:"users,omitempty"`
	Msgs  []Notice      `json:"msgs,omitempty"`
}

// MarshalNotice encodes a notice to user, or to everyone when user is
// empty, as a Kafka record value.
func MarshalNotice(user string, n Notice) ([]byte, error) {
	e := Envelope{V: NoticeEnvelopeVersion, Notice: &n, User: user, All: user == ""}
	if err := e.checkNotice(); err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		V      int     `json:"v"`
		User   string  `json:"user,omitempty"`
		All    bool    `json:"all,omitempty"`
		Notice *Notice `json:"notice"`
	}{e.V, e.User, e.All, e.Notice})
}

// checkNotice checks the notice of e: its version, one target (a user or
// all), its id, and that it carries content or data.
func (e *Envelope) checkNotice() error {
	if e.V < NoticeEnvelopeVersion {
		return Errorf(EINVALID, "envelope.v", "a notice needs envelope version %d, got %d", NoticeEnvelopeVersion, e.V)
	}
	switch {
	case e.All && e.User != "":
		return Errorf(EINVALID, "envelope.user", "a notice goes to a user or to all, not both")
	case !e.All:
		if err := CheckID("envelope.user", e.User); err != nil {
			return err
		}
	}
	if err := CheckID("envelope.notice.id", e.Notice.ID); err != nil {
		return err
	}
	if e.Notice.Content == "" && len(e.Notice.Data) == 0 {
		return Errorf(EINVALID, "envelope.notice", "has neither content nor data")
	}
	return nil
}
