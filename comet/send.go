package comet

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/sendpath"
	"github.com/danmaku/danmaku/internal/telemetry"
)

// Sends over the socket. A viewer sends comments with
// {"op":"send","room":R,"msgs":[...],"ref":N} on the connection it already
// holds, instead of a request to logic: the comet runs the send path
// (sendpath.Path: the same checks, in the same order, as POST /logic/send)
// and answers {"op":"ack","ref":N,"ids":[...]} once Kafka acknowledged the
// messages, or an error frame carrying the ref and the code, field and
// retryAfterMs an HTTP answer would carry.
//
// Who sends is the connection's user: its token's (checked like a bearer
// token of POST /logic/send, the token's rooms and roles included), or with
// auth off and no token the uid of the URL, which must then be a number
// and is also the name shown. The frame names no user.
//
// The reader runs the send to its end, so a viewer's frames are served in
// order; the sends of all the comet's viewers share the send path's Redis
// round trips (its admitter) and produce requests (its producer), which
// batch whatever arrives together. No goroutine is started per send.

// sendMetrics count the sends of the comet's viewers: what the send path
// refused and how its produces went (sendpath.Metrics), and what was
// accepted.
type sendMetrics struct {
	accepted prometheus.Counter
	refused  *prometheus.CounterVec
	produce  *prometheus.HistogramVec
}

func newSendMetrics(reg prometheus.Registerer) *sendMetrics {
	m := &sendMetrics{
		accepted: prometheus.NewCounter(prometheus.CounterOpts(opts("send_accepted_total",
			"Messages sent over viewers' sockets, acknowledged by Kafka and answered with an ack frame."))),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts(opts("send_refused_total",
			"Sends over viewers' sockets refused by the send path, by reason (user, ip, banned, muted, blocked, forbidden, priority, high_rate, members_only, slow_mode, duplicate)")), []string{"reason"}),
		produce: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "send_produce_seconds",
			Help:    "Time from handing a socket send's messages to the producer until Kafka acknowledged them (or the attempt failed).",
			Buckets: []float64{.0005, .001, .002, .004, .008, .016, .032, .064, .128, .256, .512, 1, 2, 4},
		}, []string{"result"}),
	}
	reg.MustRegister(m.accepted, m.refused, m.produce)
	telemetry.Precreate(m.refused.MetricVec, []string{"user", "ip", "banned", "muted", "blocked", "forbidden", "priority", "high_rate", "members_only", "slow_mode", "duplicate"})
	telemetry.Precreate(m.produce.MetricVec, []string{"ok", "error"})
	return m
}

// Refused counts a send the send path refused.
func (m *sendMetrics) Refused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// Produced observes one produce of a socket send.
func (m *sendMetrics) Produced(d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.produce.WithLabelValues(result).Observe(d.Seconds())
}

// takesSends reports whether the viewer may send over its connection.
func (c *conn) takesSends() bool { return c.s.send != nil }

// sendMessages serves a send frame; only the reader calls it.
func (c *conn) sendMessages(f clientFrame) {
	s := c.s
	c.sends = true
	if s.send == nil {
		c.refuseSend(f, danmaku.Errorf(danmaku.EUNAVAILABLE, "", "this comet takes no sends: POST /logic/send"), 0)
		return
	}
	req := danmaku.SendRequest{RoomID: f.Room, Messages: f.Msgs, Priority: f.Priority}
	if err := c.sender(&req); err != nil {
		c.refuseSend(f, err, 0)
		return
	}
	// The send path bounds each of its Redis calls and its produce.
	ctx := context.Background()
	checked, retry, err := s.send.Check(ctx, c.claims, c.ip, &req)
	if err == nil {
		err = s.send.Produce(ctx, &req, checked)
	}
	if err != nil {
		c.refuseSend(f, err, retry)
		return
	}
	s.sendMetrics.accepted.Add(float64(len(checked.IDs)))
	c.reply(danmaku.AckFrame{Op: danmaku.OpAck, Ref: f.Ref, IDs: checked.IDs})
}

// maxDirectReply is the largest answer to a send the reader writes
// itself (an ack of a few ids, an error frame): small enough that a
// socket with room takes it whole.
const maxDirectReply = 256

// reply answers a send frame with v. While nothing else is queued or
// being written the reader writes it at once with one non-blocking send,
// as an uncompressed text frame (allowed on a connection that negotiated
// compression too); otherwise, or when the socket has no room, the frame
// is queued behind the others.
func (c *conn) reply(v any) {
	data, ok := []byte(nil), false
	if a, isAck := v.(danmaku.AckFrame); isAck {
		data, ok = a.AppendJSON(make([]byte, 0, 64))
	}
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			panic("comet: encode frame: " + err.Error()) // only fixed types reach here
		}
	}
	if c.fc != nil && len(data) <= maxDirectReply {
		wire := make([]byte, 0, 2+len(data))
		if len(data) < 126 {
			wire = append(wire, 0x81, byte(len(data)))
		} else {
			wire = append(wire, 0x81, 126, byte(len(data)>>8), byte(len(data)))
		}
		wire = append(wire, data...)
		if !c.isClosed() && c.w.WriteIdle(func() bool { return c.writeNow(wire, len(data)) }) {
			return
		}
	}
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if err != nil {
		panic("comet: prepare frame: " + err.Error())
	}
	c.send(pm, len(data))
}

// sender checks who sends: a token that has not expired, or with no token
// a numeric uid of the URL, which becomes the sender.
func (c *conn) sender(req *danmaku.SendRequest) error {
	if c.claims != nil {
		if !c.claims.ExpiresAt.IsZero() && time.Now().After(c.claims.ExpiresAt) {
			return danmaku.Errorf(codeTokenExpired, "token", "the token has expired; reconnect with a fresh one to send")
		}
		return nil
	}
	uid, err := strconv.ParseInt(c.user, 10, 64)
	if err != nil || uid <= 0 || uid > sendpath.MaxUserID {
		return danmaku.Errorf(danmaku.EINVALID, "uid", "a send over the socket needs a token, or with auth off a uid of 1 to 2^53-1 in the URL")
	}
	req.UserID, req.UserName = uid, c.user
	return nil
}

// refuseSend answers a send with the error frame of err: its code, its
// field in the frame's terms, the send's ref, and retryAfterMs for a wait.
func (c *conn) refuseSend(f clientFrame, err error, retry int64) {
	code := danmaku.ErrorCode(err)
	msg := err.Error()
	if e, ok := err.(*danmaku.Error); ok {
		msg = e.Message
	}
	c.reply(errorFrame{Op: opError, Room: f.Room, Code: code, Message: msg, Ref: f.Ref,
		Field: frameField(danmaku.ErrorField(err)), RetryAfterMs: retry * 1000})
}

// frameField names a send's input as the frame does: roomId is room,
// messages[i] is msgs[i], userId is the connection's uid.
func frameField(field string) string {
	switch {
	case field == "roomId":
		return "room"
	case field == "userId":
		return "uid"
	case strings.HasPrefix(field, "messages"):
		return "msgs" + strings.TrimPrefix(field, "messages")
	}
	return field
}
