// Package testkit holds the few helpers every package's tests share: ids
// that no other test of the run uses, and polling for a condition with a
// deadline instead of sleeping.
package testkit

import (
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var seq atomic.Int64

// Uniq returns an id no other call in this process returns and no other
// test process running at the same time is likely to: prefix, the pid and a
// counter. It stays inside the room/user id alphabet ([A-Za-z0-9_.-]) when
// prefix does, and well under its 64 characters for short prefixes, so tests
// can share one Redis without flushing it.
func Uniq(prefix string) string {
	return fmt.Sprintf("%s%d-%d", prefix, os.Getpid()%100000, seq.Add(1))
}

// SucceedsSoon calls fn until it returns nil, failing tb with fn's last
// error when d has passed. It polls quickly at first and backs off to
// 100 ms, so a condition that holds at once costs no sleep.
func SucceedsSoon(tb testing.TB, d time.Duration, fn func() error) {
	tb.Helper()
	if err := Soon(d, fn); err != nil {
		tb.Fatalf("after %v: %v", d, err)
	}
}

// Soon is SucceedsSoon for callers that are not a test's goroutine (or
// want to handle the failure): it returns fn's last error after d.
func Soon(d time.Duration, fn func() error) error {
	deadline := time.Now().Add(d)
	wait := time.Millisecond
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// FreeAddr returns a loopback address whose port was free a moment ago,
// for a server that must be given its address before it starts (a binary
// started with a -listen flag). It never returns a port it returned before
// in this process: the kernel may hand a just-closed port out again, and
// two servers of one test given the same port would have one fail to bind
// while the other answers its health check.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr
		}
	}
	tb.Fatal("no loopback port this process has not handed out already")
	return ""
}

// handedOut holds the addresses FreeAddr returned.
var handedOut sync.Map
