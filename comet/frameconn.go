package comet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// frameConn sits between a viewer's socket and gorilla's Conn so an idle
// viewer costs little memory. It reads the incoming stream frame by frame:
//
//   - a Read never returns bytes past the end of the current frame, so once
//     gorilla has read a message its buffered reader is empty and whatever
//     arrived after it is in frameConn's buffer, where the reader can see it;
//   - pong and ping frames are consumed here (pings answered through the
//     writer). gorilla's NextReader handles control frames itself and keeps
//     blocking for the next data frame; with them filtered out, a viewer's
//     reader only enters gorilla when a data or close frame is there and
//     otherwise waits for the socket with a shallow stack (waitReadable),
//     which the runtime shrinks to the minimum.
//
// Only the viewer's reader goroutine calls Read, pump and pending.
type frameConn struct {
	net.Conn
	raw syscall.RawConn

	buf    *[frameBufSize]byte // nil while empty: idle viewers hold none
	r, w   int
	remain int64 // bytes of the current data frame not yet handed to gorilla

	onPing func(payload []byte) // called for each consumed ping
}

// frameBufSize holds any frame header (14 bytes) plus a whole control
// frame (125 bytes of payload) several times over.
const frameBufSize = 512

var frameBufPool = sync.Pool{New: func() any { return new([frameBufSize]byte) }}

const (
	opcodePing = 0x9
	opcodePong = 0xA
)

var errNotTCP = errors.New("connection has no file descriptor")

func newFrameConn(c net.Conn) (*frameConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errNotTCP
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &frameConn{Conn: c, raw: raw}, nil
}

// header parses a frame header at the start of b: its total frame length
// and opcode, and whether the payload is masked. ok is false when b does
// not hold the whole header yet.
func header(b []byte) (frameLen int64, opcode byte, masked, ok bool) {
	if len(b) < 2 {
		return 0, 0, false, false
	}
	opcode = b[0] & 0x0f
	masked = b[1]&0x80 != 0
	n := int64(b[1] & 0x7f)
	hdr := 2
	switch n {
	case 126:
		if len(b) < 4 {
			return 0, 0, false, false
		}
		n, hdr = int64(binary.BigEndian.Uint16(b[2:4])), 4
	case 127:
		if len(b) < 10 {
			return 0, 0, false, false
		}
		u := binary.BigEndian.Uint64(b[2:10])
		if u > 1<<40 {
			u = 1 << 40 // absurd; gorilla's read limit rejects it
		}
		n, hdr = int64(u), 10
	}
	if masked {
		hdr += 4
	}
	return int64(hdr) + n, opcode, masked, true
}

// consumeControl consumes the complete masked ping or pong frames at the
// start of the buffer. It reports whether the buffer (at a frame boundary)
// now starts with something for gorilla: a complete header of any other
// frame.
func (f *frameConn) consumeControl() (dataReady bool) {
	for f.remain == 0 && f.r < f.w {
		b := f.buf[f.r:f.w]
		n, op, masked, ok := header(b)
		if !ok {
			return false
		}
		if (op != opcodePing && op != opcodePong) || !masked || n > 14+125 {
			return true // gorilla reads (or rejects) it
		}
		if int64(len(b)) < n {
			return false
		}
		if op == opcodePing && f.onPing != nil {
			f.onPing(unmask(b[:n]))
		}
		f.r += int(n)
	}
	f.release()
	return false
}

// unmask returns the payload of a complete masked control frame.
func unmask(frame []byte) []byte {
	plen := int(frame[1] & 0x7f)
	key := frame[2:6]
	p := make([]byte, plen)
	for i := range p {
		p[i] = frame[6+i] ^ key[i&3]
	}
	return p
}

// release returns an empty buffer to the pool.
func (f *frameConn) release() {
	if f.buf != nil && f.r == f.w {
		frameBufPool.Put(f.buf)
		f.buf, f.r, f.w = nil, 0, 0
	}
}

// fill reads once from the socket into the buffer.
func (f *frameConn) fill() error {
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

// pump reads what the socket has, consumes control frames and reports
// whether gorilla has a frame to read.
func (f *frameConn) pump() (dataReady bool, err error) {
	if err := f.fill(); err != nil {
		return false, err
	}
	return f.consumeControl(), nil
}

// pending reports whether a frame for gorilla is already buffered.
func (f *frameConn) pending() bool {
	if f.remain > 0 {
		return true
	}
	return f.consumeControl()
}

// Read serves gorilla: bytes of the current data frame only. At a frame
// boundary it consumes control frames and reads the next header first.
func (f *frameConn) Read(p []byte) (int, error) {
	for f.remain == 0 {
		if f.consumeControl() {
			n, _, _, _ := header(f.buf[f.r:f.w])
			f.remain = n
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

// waitReadable blocks until the socket has data, EOF or an error, or the
// read deadline passes. It keeps the goroutine's stack shallow while idle.
func (f *frameConn) waitReadable() error {
	var peek [1]byte
	var werr error
	err := f.raw.Read(func(fd uintptr) bool {
		_, _, e := syscall.Recvfrom(int(fd), peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if e == syscall.EAGAIN || e == syscall.EWOULDBLOCK {
			return false
		}
		werr = e
		return true
	})
	if err != nil {
		return err
	}
	_ = werr // a socket error shows up on the next read
	return nil
}

// hijacker hands gorilla a frameConn instead of the raw connection.
type hijacker struct {
	http.ResponseWriter
	fc *frameConn
}

func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := h.ResponseWriter.(http.Hijacker).Hijack()
	if err != nil {
		return nil, nil, err
	}
	fc, err := newFrameConn(c)
	if err != nil {
		return c, brw, nil // not a socket (tests with pipes): plain reads
	}
	h.fc = fc
	return fc, brw, nil
}
