package wsframe

import (
	"syscall"
	"time"
)

// The write side. gorilla writes each frame with one Write of the
// connection it was given (a Conn); Conn passes it to the socket, or,
// between BeginNonBlocking and EndNonBlocking, sends it with one
// non-blocking send and keeps what the socket did not take (rest). The
// frame is then complete for gorilla, and rest goes out before any later
// byte: on the next Write, or by Finish. So a fan-out can write a frame to many viewers from one
// goroutine, never waiting for a slow one, and hand only the viewers
// whose socket was full to a goroutine that may block.

// BeginNonBlocking makes the connection's writes non-blocking and free
// of deadlines until EndNonBlocking; between the two the caller writes
// one whole frame (one gorilla write). The caller holds the connection's
// writes (one writer at a time).
func (f *Conn) BeginNonBlocking() { f.nonblock.Store(true) }

// EndNonBlocking ends what BeginNonBlocking began. It reports blocked
// when the socket did not take the whole frame: the rest is kept and goes
// out first with the next Write, or with Finish, which the caller runs
// where it may wait.
func (f *Conn) EndNonBlocking() (blocked bool) {
	f.nonblock.Store(false)
	f.wmu.Lock()
	defer f.wmu.Unlock()
	return len(f.rest) > 0
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
// between BeginNonBlocking and EndNonBlocking it sends what the socket takes at once and
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
// socket took (0 when its buffer is full); f.wmu is held. The function
// given to the socket's Control is made once per connection and reads its
// argument from f, so a send allocates nothing.
func (f *Conn) send(b []byte) (int, error) {
	if f.sendFn == nil {
		f.sendFn = func(fd uintptr) { f.sendN, f.sendErr = syscall.Write(int(fd), f.sendBuf) }
	}
	f.sendBuf = b
	cerr := f.raw.Control(f.sendFn)
	n, err := f.sendN, f.sendErr
	f.sendBuf, f.sendErr = nil, nil
	if err == syscall.EAGAIN || err == syscall.EWOULDBLOCK {
		return 0, nil
	}
	if cerr != nil {
		err = cerr
	}
	return max(n, 0), err
}

// SetWriteDeadline sets the socket's write deadline, except between
// BeginNonBlocking and EndNonBlocking, whose sends never wait (gorilla sets the deadline
// before every frame; the runtime's timer need not be touched for them).
func (f *Conn) SetWriteDeadline(t time.Time) error {
	if f.nonblock.Load() {
		return nil
	}
	return f.Conn.SetWriteDeadline(t)
}
