package wsframe

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// A write inside WriteNonBlocking sends what the socket takes at once and
// keeps the rest; the rest goes out before the next Write's bytes (or by
// Finish), so the reader gets every byte in order.
func TestWriteNonBlockingKeepsTheRest(t *testing.T) {
	fc, client := tcpPair(t)
	fc.Conn.(*net.TCPConn).SetWriteBuffer(4096)
	// Far more than the socket buffers hold while the client reads nothing.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	start := time.Now()
	blocked, err := fc.WriteNonBlocking(func() error {
		n, err := fc.Write(big)
		if n != len(big) {
			t.Errorf("Write inside WriteNonBlocking = %d of %d", n, len(big))
		}
		return err
	})
	if err != nil || !blocked {
		t.Fatalf("WriteNonBlocking = blocked %v, %v; want blocked", blocked, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("WriteNonBlocking waited %v", d)
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
	blocked, err = fc.WriteNonBlocking(func() error { _, err := fc.Write(big); return err })
	if err != nil || !blocked {
		t.Fatalf("second WriteNonBlocking = blocked %v, %v", blocked, err)
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

// A frame the socket takes whole is not kept, and WriteNonBlocking leaves
// no deadline of its own on the socket: it ignores gorilla's, set before
// every frame, even one long passed.
func TestWriteNonBlockingIgnoresDeadlines(t *testing.T) {
	fc, client := tcpPair(t)
	blocked, err := fc.WriteNonBlocking(func() error {
		fc.SetWriteDeadline(time.Now().Add(-time.Second))
		_, err := fc.Write([]byte("frame"))
		return err
	})
	if err != nil || blocked {
		t.Fatalf("WriteNonBlocking = blocked %v, %v", blocked, err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(client, b); err != nil || string(b) != "frame" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := fc.Write([]byte("next")); err != nil {
		t.Fatalf("a Write after WriteNonBlocking: %v", err)
	}
}
