package logic

import (
	"fmt"
	"testing"
	"time"
)

func TestReadLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newReadLimiter(2, 3)
	l.now = func() time.Time { return now }
	for i := 0; i < 3; i++ {
		if ok, _ := l.allow("192.0.2.1"); !ok {
			t.Fatalf("read %d of the burst refused", i)
		}
	}
	ok, retry := l.allow("192.0.2.1")
	if ok || retry != 500*time.Millisecond {
		t.Fatalf("beyond the burst: %v, retry %v; want refused, 500ms", ok, retry)
	}
	if ok, _ := l.allow("192.0.2.2"); !ok {
		t.Fatal("another address refused")
	}
	// One /64 is one client.
	for i := 0; i < 3; i++ {
		l.allow(fmt.Sprintf("2001:db8::%x", i+1))
	}
	if ok, _ := l.allow("2001:db8::ffff"); ok {
		t.Fatal("a fourth read from the same /64 passed")
	}
	now = now.Add(time.Second)
	if ok, _ := l.allow("192.0.2.1"); !ok {
		t.Fatal("no refill after a second")
	}
	// The map stays bounded whatever the number of addresses.
	for i := 0; i < maxReadBuckets+10; i++ {
		l.allow(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
	}
	if n := len(l.buckets); n > maxReadBuckets {
		t.Fatalf("%d buckets, want at most %d", n, maxReadBuckets)
	}
	if ok, _ := newReadLimiter(0, 0).allow("192.0.2.1"); !ok {
		t.Fatal("rate 0 limits")
	}
}
