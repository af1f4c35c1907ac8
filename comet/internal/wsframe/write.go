package wsframe

import (
	"syscall"
	"time"
)

// The write side. gorilla writes each frame with one Write of the
// connection it was given (a Conn); Conn passes it to the socket, or,
// inside WriteNonBlocking, sends it with one non-blocking send and keeps
// what the socket did not take (rest). The frame is then complete for
// gorilla, and rest goes out before any later byte: on the next Write, or
// by Finish. So a fan-out can write a frame to many viewers from one
// goroutine, never waiting for a slow one, and hand only the viewers
// whose socket was full to a goroutine that may block.

// WriteNonBlocking runs write (one gorilla write of a whole frame) with
// the connection's writes made non-blocking and free of deadlines. It
// reports blocked when the socket did not take the whole frame: the rest
// is kept and goes out first with the next Write, or with Finish, which
// the caller runs where it may wait. The caller holds the connection's
// writes (one writer at a time).
func (f *Conn) WriteNonBlocking(write func() error) (blocked bool, err error) {
	f.nonblock.Store(true)
	err = write()
	f.nonblock.Store(false)
	f.wmu.Lock()
	blocked = len(f.rest) > 0
	f.wmu.Unlock()
	return blocked, err
}

// Finish writes what a non-blocking write left of its frame, waiting for
// the socket up to deadline.
func (f *Conn) Finish(deadline time.Time) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if len(f.rest) == 0 {
		return nil
	}
	if err := f.Conn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	return f.writeRest()
}

// writeRest writes rest, blocking; f.wmu is held.
func (f *Conn) writeRest() error {
	_, err := f.Conn.Write(f.rest)
	f.rest = nil
	return err
}

// Write writes b to the socket after what a non-blocking write left;
// inside WriteNonBlocking it sends what the socket takes at once and
// keeps the rest, reporting b written.
func (f *Conn) Write(b []byte) (int, error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if !f.nonblock.Load() {
		if len(f.rest) > 0 {
			if err := f.writeRest(); err != nil {
				return 0, err
			}
		}
		return f.Conn.Write(b)
	}
	if len(f.rest) > 0 {
		f.rest = append(f.rest, b...)
		return len(b), nil
	}
	n, err := f.send(b)
	if err != nil {
		return n, err
	}
	if n < len(b) {
		f.rest = append([]byte(nil), b[n:]...)
	}
	return len(b), nil
}

// send sends b with one non-blocking send and returns how many bytes the
// socket took (0 when its buffer is full).
func (f *Conn) send(b []byte) (int, error) {
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

// SetWriteDeadline sets the socket's write deadline, except inside
// WriteNonBlocking, whose sends never wait (gorilla sets the deadline
// before every frame; the runtime's timer need not be touched for them).
func (f *Conn) SetWriteDeadline(t time.Time) error {
	if f.nonblock.Load() {
		return nil
	}
	return f.Conn.SetWriteDeadline(t)
}
