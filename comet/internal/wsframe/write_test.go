package wsframe

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// A write between BeginNonBlocking and EndNonBlocking sends what the socket takes at once and
// keeps the rest; the rest goes out before the next Write's bytes (or by
// Finish), so the reader gets every byte in order.
func TestNonBlockingWriteKeepsTheRest(t *testing.T) {
	fc, client := tcpPair(t)
	fc.Conn.(*net.TCPConn).SetWriteBuffer(4096)
	// Far more than the socket buffers hold while the client reads nothing.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	start := time.Now()
	fc.BeginNonBlocking()
	n, err := fc.Write(big)
	blocked := fc.EndNonBlocking()
	if n != len(big) || err != nil || !blocked {
		t.Fatalf("non-blocking Write = %d of %d, %v, blocked %v; want all, blocked", n, len(big), err, blocked)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the non-blocking Write waited %v", d)
	}
	if n, _ := fc.TryWrite([]byte{0x89, 0}); n != 0 {
		t.Fatal("TryWrite wrote before the rest of a frame")
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(client, int64(len(big)+4)))
		got <- b
	}()
	if _, err := fc.Write([]byte("tail")); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, append(append([]byte(nil), big...), "tail"...)) {
		t.Fatalf("read %d bytes, not the frame and then the tail", len(b))
	}

	// Finish writes the rest alone, with the deadline it is given.
	fc.BeginNonBlocking()
	_, err = fc.Write(big)
	if blocked := fc.EndNonBlocking(); err != nil || !blocked {
		t.Fatalf("second non-blocking Write = blocked %v, %v", blocked, err)
	}
	go func() {
		b, _ := io.ReadAll(io.LimitReader(client, int64(len(big))))
		got <- b
	}()
	if err := fc.Finish(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("read %d bytes after Finish, want the frame", len(b))
	}
	if err := fc.Finish(time.Now().Add(time.Second)); err != nil {
		t.Fatalf("Finish with nothing left: %v", err)
	}
}

// A frame the socket takes whole is not kept, and a non-blocking write leaves
// no deadline of its own on the socket: it ignores gorilla's, set before
// every frame, even one long passed.
func TestNonBlockingWriteIgnoresDeadlines(t *testing.T) {
	fc, client := tcpPair(t)
	fc.BeginNonBlocking()
	fc.SetWriteDeadline(time.Now().Add(-time.Second))
	_, err := fc.Write([]byte("frame"))
	if blocked := fc.EndNonBlocking(); err != nil || blocked {
		t.Fatalf("non-blocking Write = blocked %v, %v", blocked, err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(client, b); err != nil || string(b) != "frame" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := fc.Write([]byte("next")); err != nil {
		t.Fatalf("a Write after the non-blocking one: %v", err)
	}
}
