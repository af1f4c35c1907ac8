package comet

import (
	"bytes"
	"compress/flate"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A client's heartbeat ({"op":"ping"}, danmaku.js sends one every
// heartbeatMs) is the frame an idle viewer sends most. The reader takes it
// on its own shallow stack, without gorilla, JSON or the writer's drain:
// wsframe.Conn hands it the frame from inside WaitReadable's receive
// (OnText) or after it (Text). The pong is owed, not written at once: the
// ping sweep's next tick (a fraction of a second later) writes the pongs
// owed to every viewer together, one non-blocking send each. Heartbeats
// arrive at scattered moments, each waking the comet alone; their pongs
// written one by one each woke the client's process alone too, while a
// burst of them reaches clients that are already awake.

// heartbeatText is a client's heartbeat as it is sent.
var heartbeatText = []byte(`{"op":"ping"}`)

// pongWire is pongFrame as an uncompressed server text frame (allowed on a
// connection that negotiated compression too).
var pongWire = append([]byte{0x81, byte(pongFrameLen)}, `{"op":"pong"}`...)

// heartbeatMatch returns what wsframe.Conn.Text is to match: the
// heartbeat as sent, or compressed in a form seen before when the viewer
// negotiated compression (browsers then compress every frame).
func (c *conn) heartbeatMatch() func([]byte, bool) bool {
	if c.deflate {
		return isHeartbeat
	}
	return isPlainHeartbeat
}

func isPlainHeartbeat(p []byte, compressed bool) bool {
	return !compressed && bytes.Equal(p, heartbeatText)
}

func isHeartbeat(p []byte, compressed bool) bool {
	if compressed {
		return deflatedHeartbeats.has(p)
	}
	return bytes.Equal(p, heartbeatText)
}

// onText is the viewer's wsframe.Conn.OnText: it takes a heartbeat.
func (c *conn) onText(p []byte, compressed bool) bool {
	if !c.heartbeatMatch()(p, compressed) {
		return false
	}
	c.answerHeartbeat()
	return true
}

// answerHeartbeat notes the heartbeat (a sign of life; the viewer needs no
// ping this period) and owes it a pong frame, which the ping sweep's next
// tick writes (pongsOwed).
func (c *conn) answerHeartbeat() {
	now := time.Now().UnixNano()
	c.seen.Store(now)
	c.heartbeat.Store(now)
	if !c.isClosed() && c.pongsOwed.Add(1) == 1 {
		c.s.owed.add(c)
	}
}

// payPongs writes the pong frames owed to c: each with one non-blocking
// send while nothing else is being written, queued otherwise.
func (c *conn) payPongs() {
	for n := c.pongsOwed.Swap(0); n > 0 && !c.isClosed(); n-- {
		if !c.w.WriteIdle(c.pongNow) {
			c.send(pongFrame, pongFrameLen)
		}
	}
}

// pongNow writes pongWire; see writeNow.
func (c *conn) pongNow() bool { return c.writeNow(pongWire, pongFrameLen) }

// pongsOwed lists the viewers owed pong frames, each once however many it
// is owed (conn.pongsOwed counts them), until the ping sweep pays them.
type pongsOwed struct {
	mu    sync.Mutex
	conns []*conn
	spare []*conn // the last paid list, reused
}

func (o *pongsOwed) add(c *conn) {
	o.mu.Lock()
	o.conns = append(o.conns, c)
	o.mu.Unlock()
}

// pay writes every owed pong.
func (o *pongsOwed) pay() {
	o.mu.Lock()
	conns := o.conns
	o.conns, o.spare = o.spare[:0], nil
	o.mu.Unlock()
	for _, c := range conns {
		c.payPongs()
	}
	clear(conns)
	o.mu.Lock()
	o.spare = conns[:0]
	o.mu.Unlock()
}

// offersDeflate reports whether the handshake offers permessage-deflate,
// as gorilla's Upgrade decides it (the first token of an extension).
func offersDeflate(h http.Header) bool {
	for _, v := range h.Values("Sec-WebSocket-Extensions") {
		for _, ext := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(ext, ";")
			if strings.TrimSpace(name) == "permessage-deflate" {
				return true
			}
		}
	}
	return false
}

// deflatedHeartbeats are the compressed forms of heartbeatText clients
// sent. With no context takeover (what gorilla negotiates) a compressor
// writes the same bytes for the same text every time, so each kind of
// client adds one form, learned the first time the reader sees it (see
// learnHeartbeat), and the set stays small; it is bounded all the same.
var deflatedHeartbeats deflatedSet

// maxDeflatedForms bounds deflatedHeartbeats.
const maxDeflatedForms = 16

type deflatedSet struct {
	mu    sync.Mutex // serializes adds
	forms atomic.Pointer[[]string]
}

func (d *deflatedSet) has(p []byte) bool {
	if l := d.forms.Load(); l != nil {
		for _, f := range *l {
			if f == string(p) {
				return true
			}
		}
	}
	return false
}

func (d *deflatedSet) full() bool {
	l := d.forms.Load()
	return l != nil && len(*l) >= maxDeflatedForms
}

func (d *deflatedSet) add(p []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.has(p) || d.full() {
		return
	}
	var l []string
	if old := d.forms.Load(); old != nil {
		l = append(l, *old...)
	}
	l = append(l, string(p))
	d.forms.Store(&l)
}

// deflateTail ends a message's compressed bytes for a reader: the empty
// block a sender strips (RFC 7692) and a final empty block.
const deflateTail = "\x00\x00\xff\xff\x01\x00\x00\xff\xff"

var inflaters sync.Pool

// learnHeartbeat adds the compressed payload p to deflatedHeartbeats when
// it is heartbeatText compressed. It never consumes the frame (gorilla
// reads it as usual); the reader calls it for a compressed frame it could
// not answer itself, so once per kind of client until the set is full.
func learnHeartbeat(p []byte, compressed bool) bool {
	if !compressed || deflatedHeartbeats.has(p) || deflatedHeartbeats.full() {
		return false
	}
	src := io.MultiReader(bytes.NewReader(p), strings.NewReader(deflateTail))
	fr, _ := inflaters.Get().(io.ReadCloser)
	if fr == nil {
		fr = flate.NewReader(src)
	} else {
		fr.(flate.Resetter).Reset(src, nil)
	}
	var out [32]byte
	n, _ := io.ReadFull(fr, out[:])
	inflaters.Put(fr)
	if bytes.Equal(out[:n], heartbeatText) {
		deflatedHeartbeats.add(p)
	}
	return false
}
