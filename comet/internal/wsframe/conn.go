// Package wsframe sits between a viewer's socket and gorilla/websocket so
// an idle viewer costs little memory: Conn hands gorilla one data frame at
// a time, consumes pings and pongs itself, and lets the viewer's reader
// wait for the socket with a shallow stack (WaitReadable). Hijacker makes
// gorilla's Upgrade use it.
package wsframe

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// Conn sits between a viewer's socket and gorilla's Conn so an idle
// viewer costs little memory. It reads the incoming stream frame by frame:
//
//   - a Read never returns bytes past the end of the current frame, so once
//     gorilla has read a message its buffered reader is empty and whatever
//     arrived after it is in Conn's buffer, where the reader can see it;
//   - pong and ping frames are consumed here (pings answered through the
//     writer). gorilla's NextReader handles control frames itself and keeps
//     blocking for the next data frame; with them filtered out, a viewer's
//     reader only enters gorilla when a data or close frame is there and
//     otherwise waits for the socket with a shallow stack (WaitReadable),
//     which the runtime shrinks to the minimum.
//
// Ownership: only the viewer's reader goroutine calls Read, Pump, Pending
// and WaitReadable, and so owns every field; OnPing and OnPong are set
// before it starts. TryWrite, Write, Cork and Uncork may be called by any
// goroutine that holds the connection's writes; held belongs to it.
type Conn struct {
	net.Conn
	raw syscall.RawConn
	// held is set between Cork and Uncork: the writes kept for Uncork.
	held *net.Buffers

	buf    *[frameBufSize]byte // nil while empty: idle viewers hold none
	r, w   int
	remain int64 // bytes of the current data frame not yet handed to gorilla
	// stashed is set while the buffer holds bytes WaitReadable received
	// that no Pump has looked at yet.
	stashed bool

	OnPing func(payload []byte) // called for each consumed ping
	OnPong func()               // called when WaitReadable consumed pongs
	// OnText is offered a small text frame WaitReadable received whole,
	// as Text offers one (match); the frame is consumed when it reports
	// true. It runs inside WaitReadable's receive: it must not block.
	OnText func(payload []byte, compressed bool) bool
}

// frameBufSize holds any frame header (14 bytes) plus a whole control
// frame (at most 125 bytes of payload) several times over.
const frameBufSize = 512

var frameBufPool = sync.Pool{New: func() any { return new([frameBufSize]byte) }}

const (
	opcodeText = 0x1
	opcodePing = 0x9
	opcodePong = 0xA
)

// ErrNotSocket is New's answer for a connection without a file
// descriptor to wait on (a TLS connection, a pipe).
var ErrNotSocket = errors.New("connection has no file descriptor")

// New wraps c, which must be a socket.
func New(c net.Conn) (*Conn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, ErrNotSocket
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: c, raw: raw}, nil
}

// frameHeader is what Conn needs of a WebSocket frame header
// (RFC 6455 section 5.2).
type frameHeader struct {
	frameLen int64 // the whole frame: header, masking key and payload
	hdrLen   int   // header bytes, masking key included
	opcode   byte
	masked   bool
	// final is set for a frame with FIN and no RSV bit: the only form of
	// a control frame RFC 6455 allows (control frames are never
	// fragmented).
	final bool
}

// payloadLen is the length of the frame's payload.
func (h frameHeader) payloadLen() int64 { return h.frameLen - int64(h.hdrLen) }

// maxFrameLen caps the length a header may announce. Any longer frame is
// far beyond gorilla's read limit, which rejects it.
const maxFrameLen = 1 << 40

// parseHeader parses the frame header at the start of b. ok is false
// while b does not hold the header up to its masking key. The bytes come
// from the client unchecked: any length, opcode or flag combination is
// parsed, and judging it is left to the caller and to gorilla.
func parseHeader(b []byte) (h frameHeader, ok bool) {
	if len(b) < 2 {
		return frameHeader{}, false
	}
	h.opcode = b[0] & 0x0f
	h.final = b[0]&0xf0 == 0x80
	h.masked = b[1]&0x80 != 0
	n := uint64(b[1] & 0x7f)
	h.hdrLen = 2
	switch n {
	case 126:
		h.hdrLen = 4
	case 127:
		h.hdrLen = 10
	}
	if h.masked {
		h.hdrLen += 4
	}
	if len(b) < h.hdrLen {
		return frameHeader{}, false
	}
	switch n {
	case 126:
		n = uint64(binary.BigEndian.Uint16(b[2:4]))
	case 127:
		n = min(binary.BigEndian.Uint64(b[2:10]), maxFrameLen)
	}
	h.frameLen = int64(h.hdrLen) + int64(n)
	return h, true
}

// consumeControl consumes the complete masked ping or pong frames at the
// start of the buffer. It reports whether the buffer (at a frame boundary)
// now starts with something for gorilla: a complete header of any other
// frame, or of a control frame gorilla must reject (unmasked, fragmented
// or with RSV bits, or with a payload over 125 bytes), which it closes with
// 1002.
func (f *Conn) consumeControl() (dataReady bool) {
	for f.remain == 0 && f.r < f.w {
		b := f.buf[f.r:f.w]
		h, ok := parseHeader(b)
		if !ok {
			return false
		}
		if (h.opcode != opcodePing && h.opcode != opcodePong) || !h.masked || !h.final || h.payloadLen() > maxControlPayload {
			return true // gorilla reads (or rejects) it
		}
		if int64(len(b)) < h.frameLen {
			return false
		}
		if h.opcode == opcodePing && f.OnPing != nil {
			f.OnPing(unmask(b[:h.frameLen], h.hdrLen))
		}
		f.r += int(h.frameLen)
	}
	f.release()
	return false
}

// maxControlPayload is the largest payload RFC 6455 allows a control frame.
const maxControlPayload = 125

// unmask returns the payload of a complete masked frame whose header,
// masking key included, is hdrLen bytes long.
func unmask(frame []byte, hdrLen int) []byte {
	key := frame[hdrLen-4 : hdrLen]
	p := make([]byte, len(frame)-hdrLen)
	for i := range p {
		p[i] = frame[hdrLen+i] ^ key[i&3]
	}
	return p
}

// release returns an empty buffer to the pool.
func (f *Conn) release() {
	if f.buf != nil && f.r == f.w {
		frameBufPool.Put(f.buf)
		f.buf, f.r, f.w = nil, 0, 0
		f.stashed = false
	}
}

// fill reads once from the socket into the buffer.
func (f *Conn) fill() error {
	if f.buf == nil {
		f.buf = frameBufPool.Get().(*[frameBufSize]byte)
	}
	if f.r > 0 && f.w == len(f.buf) {
		f.w = copy(f.buf[:], f.buf[f.r:f.w])
		f.r = 0
	}
	n, err := f.Conn.Read(f.buf[f.w:])
	f.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = errors.New("empty read")
	}
	return err
}

// Pump reads what the socket has (or takes what WaitReadable received),
// consumes control frames and reports whether gorilla has a frame to read.
func (f *Conn) Pump() (dataReady bool, err error) {
	if f.stashed {
		f.stashed = false
	} else if err := f.fill(); err != nil {
		return false, err
	}
	return f.consumeControl(), nil
}

// Pending reports whether a frame for gorilla is already buffered.
func (f *Conn) Pending() bool {
	if f.remain > 0 {
		return true
	}
	return f.consumeControl()
}

// Read serves gorilla: bytes of the current data frame only. At a frame
// boundary it consumes control frames and reads the next header first.
func (f *Conn) Read(p []byte) (int, error) {
	for f.remain == 0 {
		if f.consumeControl() {
			h, _ := parseHeader(f.buf[f.r:f.w])
			f.remain = h.frameLen
			break
		}
		if err := f.fill(); err != nil {
			return 0, err
		}
	}
	if int64(len(p)) > f.remain {
		p = p[:f.remain]
	}
	var n int
	if f.r < f.w {
		n = copy(p, f.buf[f.r:f.w])
		f.r += n
		f.release()
	} else {
		var err error
		n, err = f.Conn.Read(p)
		if err != nil && n == 0 {
			return 0, err
		}
	}
	f.remain -= int64(n)
	return n, nil
}

// WaitReadable blocks until the socket has something for the reader:
// data, which is then in Conn's buffer or still in the socket for Pump,
// or the end of the connection, which it returns as an error. It keeps
// the goroutine's stack shallow while idle.
//
// While Conn holds nothing, what arrives is read at once, with one
// non-blocking receive into a small array on this stack: complete pongs
// are consumed there, OnPong is called, a small text frame OnText accepts
// (a client's heartbeat) is consumed too, and it waits on; anything else
// (a data frame, half a pong) goes into Conn's buffer and it returns. An
// idle viewer's answer to a ping, or its heartbeat, thus costs one wake-up
// and one receive, and no other goroutine.
func (f *Conn) WaitReadable() error {
	var closed error
	err := f.raw.Read(func(fd uintptr) bool {
		if f.OnPong == nil || f.buf != nil || f.remain != 0 {
			return f.peekReady(fd)
		}
		var b [pongRead]byte
		have := 0 // the start of a frame kept from the last receive
		for {
			n, _, e := syscall.Recvfrom(int(fd), b[have:], syscall.MSG_DONTWAIT)
			switch {
			case e == syscall.EAGAIN || e == syscall.EWOULDBLOCK:
				if have > 0 {
					f.stash(b[:have])
					return true
				}
				return false
			case e != nil:
				closed = e
				return true
			case n <= 0:
				closed = io.EOF
				return true
			}
			n += have
			k := pongsLen(b[:n])
			if k > 0 {
				f.OnPong()
			}
			if k < n && f.OnText != nil && matchText(b[k:n], f.OnText) {
				k = n
			}
			have = copy(b[:], b[k:n])
			switch {
			case have > 0 && (k == 0 || n < len(b)):
				// Not a pong, or half of one with nothing more to read.
				f.stash(b[:have])
				return true
			case have == 0 && n < len(b):
				// A short read emptied the socket: what comes later is a
				// new edge for the poller, so it waits without another
				// receive.
				return false
			}
		}
	})
	if err != nil {
		return err
	}
	return closed
}

// peekReady reports whether the socket has data, EOF or an error, leaving
// it there.
func (f *Conn) peekReady(fd uintptr) bool {
	var b [1]byte
	_, _, e := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return e != syscall.EAGAIN && e != syscall.EWOULDBLOCK
}

// stash puts bytes WaitReadable received into the empty buffer; the next
// Pump serves them before it reads the socket again.
func (f *Conn) stash(b []byte) {
	f.buf = frameBufPool.Get().(*[frameBufSize]byte)
	f.r, f.w = 0, copy(f.buf[:], b)
	f.stashed = true
}

// pongRead is how many bytes WaitReadable reads at once: a few pongs with
// the payloads a ping of the comet carries (none).
const pongRead = 32

// pongsLen returns the length of the complete masked pong frames at the
// start of b.
func pongsLen(b []byte) int {
	n := 0
	for n < len(b) {
		h, ok := parseHeader(b[n:])
		if !ok || h.opcode != opcodePong || !h.masked || !h.final || h.payloadLen() > maxControlPayload ||
			int64(len(b)-n) < h.frameLen {
			break
		}
		n += int(h.frameLen)
	}
	return n
}

// maxText is the longest payload Text looks at.
const maxText = 64

// Text offers the buffered frame to match when the buffer holds exactly
// one complete masked, final text frame (RSV1 may be set: compressed,
// which match is told) of at most maxText bytes of payload, at a frame
// boundary. match gets the unmasked payload (valid during the call only);
// when it reports true the frame is consumed and Text reports true. It
// lets the reader answer a small frame it expects (a heartbeat) without
// gorilla, on its shallow stack. Only the reader calls it.
func (f *Conn) Text(match func(payload []byte, compressed bool) bool) bool {
	if f.buf == nil || f.remain != 0 || !matchText(f.buf[f.r:f.w], match) {
		return false
	}
	f.r = f.w
	f.release()
	return true
}

// matchText reports whether b is exactly one complete masked, final text
// frame of at most maxText bytes of payload that match accepts (see Text).
func matchText(b []byte, match func(payload []byte, compressed bool) bool) bool {
	h, ok := parseHeader(b)
	if !ok || h.opcode != opcodeText || !h.masked || b[0]&0xb0 != 0x80 ||
		h.frameLen != int64(len(b)) || h.payloadLen() > maxText {
		return false
	}
	var p [maxText]byte
	n := copy(p[:], b[h.hdrLen:])
	key := b[h.hdrLen-4 : h.hdrLen]
	for i := range n {
		p[i] ^= key[i&3]
	}
	return match(p[:n], b[0]&0x40 != 0)
}

// TryWrite writes b with one non-blocking send and returns how many bytes
// the socket took (0 when its buffer is full); it never waits. It is for
// a frame small enough to go whole into any socket with room: a ping. It
// ignores the write deadline (gorilla leaves the last one set, long
// passed on an idle connection) and takes no lock of the net package: the
// caller makes sure no other frame is being written.
func (f *Conn) TryWrite(b []byte) (int, error) {
	var n int
	var err error
	cerr := f.raw.Control(func(fd uintptr) {
		n, err = syscall.Write(int(fd), b)
	})
	if err == syscall.EAGAIN || err == syscall.EWOULDBLOCK {
		return 0, nil
	}
	if cerr != nil {
		err = cerr
	}
	return max(n, 0), err
}

// Write writes b to the socket, or, while the connection is corked,
// keeps b (not a copy) for Uncork.
func (f *Conn) Write(b []byte) (int, error) {
	if f.held != nil {
		*f.held = append(*f.held, b)
		return len(b), nil
	}
	return f.Conn.Write(b)
}

// Cork makes the Writes that follow wait for Uncork, which writes them
// in one system call. Write keeps the slices it is given: until Uncork
// nothing may change them (gorilla's prepared frames, which never
// change).
func (f *Conn) Cork() {
	if f.held == nil {
		f.held = heldPool.Get().(*net.Buffers)
	}
}

// Uncork writes what was written since Cork, as one writev when the
// socket takes it (the rest when it has room, within the write
// deadline), and ends the cork.
func (f *Conn) Uncork() error {
	h := f.held
	if h == nil {
		return nil
	}
	f.held = nil
	bufs := *h
	_, err := bufs.WriteTo(f.Conn)
	clear((*h)[:cap(*h)])
	*h = (*h)[:0]
	heldPool.Put(h)
	return err
}

var heldPool = sync.Pool{New: func() any { return new(net.Buffers) }}

// Hijacker hands gorilla a Conn instead of the raw connection; Frames is
// it once Upgrade hijacked a socket (nil for any other connection).
type Hijacker struct {
	http.ResponseWriter
	Frames *Conn
}

// Hijack hijacks the connection and wraps it when it is a socket.
func (h *Hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := h.ResponseWriter.(http.Hijacker).Hijack()
	if err != nil {
		return nil, nil, err
	}
	fc, err := New(c)
	if err != nil {
		// Not a socket (a TLS connection, when an embedding server
		// terminates TLS): gorilla reads it directly and the viewer's
		// reader runs serveFrames.
		return c, brw, nil
	}
	h.Frames = fc
	return fc, brw, nil
}
