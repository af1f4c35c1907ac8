package loadtest

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// wsConn is a viewer's WebSocket with permessage-deflate, read straight off
// its TCP connection. A comet compresses a frame once and writes the same
// bytes to every viewer that negotiated compression (no context takeover),
// as browsers negotiate it by default; so the viewers of one process share
// the inflating of a message (inflateCache, keyed by its compressed bytes)
// and each still reads, and compares, every byte its socket carried. The
// load tool then costs what a browser's socket reading costs, not one
// inflate per viewer, on the machine it shares with the servers.
type wsConn struct {
	conn  net.Conn
	br    *bufio.Reader
	cache *inflateCache
	msg   *[]byte // the message being read; pooled, returned by the next read
	rd    bytes.Reader
	ctl   [125]byte
	pong  [6 + 125]byte
}

// maxMessage bounds one message a viewer assembles.
const maxMessage = 64 << 20

// wsGUID is the key suffix of RFC 6455's opening handshake.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

var msgBufs = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// dialDeflate opens path?query on target as a WebSocket that offers
// permessage-deflate without context takeover, over a connection from
// dial. A refused handshake returns the response.
func dialDeflate(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), target, query string, timeout time.Duration, cache *inflateCache) (*wsConn, *http.Response, error) {
	var nonce [16]byte
	rand.Read(nonce[:])
	key := base64.StdEncoding.EncodeToString(nonce[:])
	conn, br, resp, err := openHTTP(ctx, dial, target, "GET /ws?"+query+" HTTP/1.1\r\nHost: "+target+
		"\r\nOrigin: http://"+target+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13"+
		"\r\nSec-WebSocket-Key: "+key+
		"\r\nSec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\n\r\n",
		http.StatusSwitchingProtocols, timeout)
	if err != nil {
		return nil, resp, err
	}
	sum := sha1.Sum([]byte(key + wsGUID))
	if resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		conn.Close()
		return nil, nil, errors.New("handshake: bad Sec-WebSocket-Accept")
	}
	if !strings.Contains(resp.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate") {
		conn.Close()
		return nil, nil, errors.New("handshake: permessage-deflate not accepted")
	}
	conn.SetDeadline(time.Time{})
	return &wsConn{conn: conn, br: br, cache: cache}, nil, nil
}

// NextReader returns the next data message as a reader; see next.
func (c *wsConn) NextReader() (int, io.Reader, error) {
	op, data, err := c.next()
	if err != nil {
		return 0, nil, err
	}
	c.rd.Reset(data)
	return op, &c.rd, nil
}

// next returns the next data message, inflated. Pings are answered,
// pongs skipped, and a close frame comes out as a *websocket.CloseError.
// The message is valid until the next call and must not be modified: a
// compressed one is shared with the process's other viewers.
func (c *wsConn) next() (int, []byte, error) {
	if c.msg != nil {
		*c.msg = (*c.msg)[:0]
		msgBufs.Put(c.msg)
		c.msg = nil
	}
	op, compressed := 0, false
	var buf []byte
	for {
		b0, b1, n, err := c.header()
		if err != nil {
			return 0, nil, err
		}
		if code := int(b0 & 0x0f); code >= 8 {
			if err := c.control(code, n); err != nil {
				return 0, nil, err
			}
			continue
		}
		if b1&0x80 != 0 {
			return 0, nil, errors.New("websocket: masked frame from the server")
		}
		if op == 0 {
			op, compressed = int(b0&0x0f), b0&0x40 != 0
			if op == 0 {
				return 0, nil, errors.New("websocket: continuation without a message")
			}
			c.msg = msgBufs.Get().(*[]byte)
			buf = (*c.msg)[:0]
		}
		if uint64(len(buf))+n > maxMessage {
			return 0, nil, errors.New("websocket: message too large")
		}
		buf = slices.Grow(buf, int(n))
		if _, err := io.ReadFull(c.br, buf[len(buf):len(buf)+int(n)]); err != nil {
			return 0, nil, err
		}
		buf = buf[:len(buf)+int(n)]
		*c.msg = buf
		if b0&0x80 == 0 {
			continue
		}
		if !compressed {
			return op, buf, nil
		}
		data, err := c.cache.inflate(buf)
		return op, data, err
	}
}

// header reads a frame's first two bytes and its payload length.
func (c *wsConn) header() (b0, b1 byte, n uint64, err error) {
	var h [8]byte
	if _, err = io.ReadFull(c.br, h[:2]); err != nil {
		return
	}
	b0, b1 = h[0], h[1]
	switch n = uint64(b1 & 0x7f); n {
	case 126:
		if _, err = io.ReadFull(c.br, h[:2]); err == nil {
			n = uint64(binary.BigEndian.Uint16(h[:2]))
		}
	case 127:
		if _, err = io.ReadFull(c.br, h[:8]); err == nil {
			n = binary.BigEndian.Uint64(h[:8])
		}
	}
	return
}

// control reads a control frame of n bytes: a ping is answered with a
// masked pong of its payload, a close ends the session.
func (c *wsConn) control(code int, n uint64) error {
	if n > uint64(len(c.ctl)) {
		return errors.New("websocket: control frame too large")
	}
	p := c.ctl[:n]
	if _, err := io.ReadFull(c.br, p); err != nil {
		return err
	}
	switch code {
	case websocket.PingMessage:
		f := c.pong[:6+n]
		f[0], f[1] = 0x80|websocket.PongMessage, 0x80|byte(n)
		rand.Read(f[2:6])
		for i, b := range p {
			f[6+i] = b ^ f[2+i%4]
		}
		c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, err := c.conn.Write(f)
		return err
	case websocket.CloseMessage:
		ce := &websocket.CloseError{Code: websocket.CloseNoStatusReceived}
		if n >= 2 {
			ce.Code, ce.Text = int(binary.BigEndian.Uint16(p)), string(p[2:])
		}
		return ce
	}
	return nil
}

// ReadMessage returns a copy of the next data message.
func (c *wsConn) ReadMessage() (int, []byte, error) {
	op, b, err := c.next()
	return op, bytes.Clone(b), err
}

func (c *wsConn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }
func (c *wsConn) NetConn() net.Conn                 { return c.conn }

// inflateCache holds what recent compressed messages inflate to, keyed by
// a hash of their compressed bytes and checked against those bytes, so a
// message is inflated about once per process however many viewers read
// it. Messages under minShared bytes (welcomes, notices, pongs: one
// viewer's own) are inflated each time and not kept.
type inflateCache struct {
	seed   maphash.Seed
	shards [16]inflateShard
	// inflated counts messages inflated, shared the ones a viewer took
	// from the cache.
	inflated, shared atomic.Uint64
}

type inflateShard struct {
	mu       sync.Mutex
	cur, old map[uint64]*inflated
}

type inflated struct{ z, out []byte }

const (
	minShared      = 64
	shardEntries   = 32 // per generation: at most 2 x 16 x 32 messages kept
	deflateTrailer = "\x00\x00\xff\xff\x01\x00\x00\xff\xff"
)

func newInflateCache() *inflateCache { return &inflateCache{seed: maphash.MakeSeed()} }

var flateReaders sync.Pool

// inflate returns what z, one message's compressed bytes, inflates to.
// The result is shared: callers must not modify it.
func (c *inflateCache) inflate(z []byte) ([]byte, error) {
	if len(z) < minShared {
		c.inflated.Add(1)
		return inflateMessage(z)
	}
	h := maphash.Bytes(c.seed, z)
	s := &c.shards[h%uint64(len(c.shards))]
	s.mu.Lock()
	e := s.cur[h]
	if e == nil && s.old[h] != nil {
		e = s.old[h]
		s.cur[h] = e
	}
	s.mu.Unlock()
	if e != nil && bytes.Equal(e.z, z) {
		c.shared.Add(1)
		return e.out, nil
	}
	out, err := inflateMessage(z)
	if err != nil {
		return nil, err
	}
	c.inflated.Add(1)
	e = &inflated{z: bytes.Clone(z), out: out}
	s.mu.Lock()
	if len(s.cur) >= shardEntries {
		s.old, s.cur = s.cur, nil
	}
	if s.cur == nil {
		s.cur = make(map[uint64]*inflated, shardEntries)
	}
	s.cur[h] = e
	s.mu.Unlock()
	return out, nil
}

// inflateMessage inflates one permessage-deflate message (RFC 7692: the
// sender dropped the empty block's trailing 00 00 ff ff).
func inflateMessage(z []byte) ([]byte, error) {
	src := io.MultiReader(bytes.NewReader(z), strings.NewReader(deflateTrailer))
	fr, _ := flateReaders.Get().(io.ReadCloser)
	if fr == nil {
		fr = flate.NewReader(src)
	} else {
		fr.(flate.Resetter).Reset(src, nil) // never fails: src is no dictionary reader
	}
	out, err := io.ReadAll(fr)
	flateReaders.Put(fr)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return out, nil
}
