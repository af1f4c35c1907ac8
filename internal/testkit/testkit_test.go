package testkit

import (
	"errors"
	"regexp"
	"testing"
	"time"
)

func TestUniq(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := Uniq("room-")
		if seen[id] || !valid.MatchString(id) {
			t.Fatalf("Uniq gave %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
}

func TestSoon(t *testing.T) {
	n := 0
	if err := Soon(time.Second, func() error {
		if n++; n < 5 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || n != 5 {
		t.Fatalf("Soon = %v after %d calls, want nil after 5", err, n)
	}
	start := time.Now()
	want := errors.New("never")
	if err := Soon(50*time.Millisecond, func() error { return want }); err != want {
		t.Fatalf("Soon = %v, want the last error", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond || took > time.Second {
		t.Fatalf("Soon gave up after %v, want about 50ms", took)
	}
}

// FreeAddr does not hand out one port twice, even when the kernel would.
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		a := FreeAddr(t)
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
}
