package comet

import (
	"syscall"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
)

// A viewer's socket has the kernel's TCP keepalive on, probing only after
// PongWait + PingPeriod without a segment: never between two pings of a
// live viewer, only as a backstop behind them (viewerListenConfig).
func TestViewerKeepaliveBehindPings(t *testing.T) {
	s, _ := mustStart(t, func(c *Config) { c.PingPeriod, c.PongWait = 2*time.Second, 5*time.Second })
	v := mustDial(t, s, "room="+testkit.Uniq("ka-"))
	mustReadOp(t, v, opWelcome)
	var found *conn
	for i := range numShards {
		s.hub.forEachConn(i, nil, func(c *conn) { found = c })
	}
	if found == nil || found.fc == nil {
		t.Fatal("the viewer's connection is not in the hub")
	}
	raw, err := found.fc.Conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var on, idle int
	raw.Control(func(fd uintptr) {
		on, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		idle, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
	})
	if on != 1 || idle != 7 {
		t.Fatalf("keepalive %d, idle %d s; want on, 7 s (pong_wait 5 s + ping_period 2 s)", on, idle)
	}
}
