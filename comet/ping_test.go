package comet

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// viewerProcessEnv makes the test binary a viewer process (TestMain): it
// joins the room at the URL the variable holds, answers pings while it
// reads, and prints "ready" once welcomed. With viewerHeartbeatEnv set to
// a duration it also sends {"op":"ping"} that often, as danmaku.js does.
const (
	viewerProcessEnv   = "COMET_TEST_VIEWER_URL"
	viewerHeartbeatEnv = "COMET_TEST_VIEWER_HEARTBEAT"
)

func viewerProcess(url string) int {
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "viewer:", err)
		return 1
	}
	if _, _, err := ws.ReadMessage(); err != nil {
		fmt.Fprintln(os.Stderr, "viewer:", err)
		return 1
	}
	if every, _ := time.ParseDuration(os.Getenv(viewerHeartbeatEnv)); every > 0 {
		// Pings are answered by the reader below, which writes under the
		// same lock as WriteMessage.
		var mu sync.Mutex
		ws.SetPingHandler(func(data string) error {
			mu.Lock()
			defer mu.Unlock()
			return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
		})
		go func() {
			for range time.Tick(every) {
				mu.Lock()
				err := ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"ping"}`))
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	fmt.Println("ready")
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			return 0
		}
	}
}

// startViewerProcess starts a viewer process (viewerProcess) of room,
// heartbeating every heartbeat unless zero, and waits until it is welcomed.
func startViewerProcess(t *testing.T, s *Server, room string, heartbeat time.Duration) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), viewerProcessEnv+"="+wsURL(s, "room="+room), viewerHeartbeatEnv+"="+heartbeat.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGCONT); cmd.Process.Kill(); cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("viewer process said %q", line)
	}
	return cmd
}

// A peer that stops answering is closed when its silence passes PongWait,
// at the ping sweep, so between PongWait and PongWait + PingPeriod after its
// last sign of life (docs/protocol.md, Heartbeat): a raw TCP client that
// completed the handshake and then neither reads nor writes, a viewer
// process that answered pings until it was stopped (SIGSTOP: its kernel
// still acknowledges every segment, so only the missing pongs tell), and
// one that sent heartbeats of its own (so it was not pinged) until it was
// stopped. A viewer answering pings stays.
func TestDeadPeersClosedInTime(t *testing.T) {
	const period, wait = 250 * time.Millisecond, time.Second
	s, _ := mustStart(t, func(c *Config) {
		c.PingPeriod = period
		c.PongWait = wait
	})
	rawRoom, stopRoom, beatRoom, liveRoom := testkit.Uniq("raw-"), testkit.Uniq("stopped-"), testkit.Uniq("beating-"), testkit.Uniq("live-")
	live := mustDial(t, s, "room="+liveRoom)
	mustReadOp(t, live, opWelcome)
	go func() {
		for {
			if _, _, err := live.NextRaw(time.Minute); err != nil {
				return
			}
		}
	}()

	// The stopped viewers answer pings, or heartbeat, for several periods
	// first.
	cmd := startViewerProcess(t, s, stopRoom, 0)
	beating := startViewerProcess(t, s, beatRoom, period/2)
	time.Sleep(2 * wait)
	if n, m := s.hub.local(stopRoom), s.hub.local(beatRoom); n != 1 || m != 1 {
		t.Fatalf("a viewer process answering pings (%d) or heartbeating (%d) was closed", n, m)
	}
	if connOf(s, beatRoom).heartbeat.Load() == 0 {
		t.Fatal("the heartbeating viewer's heartbeats were not taken")
	}

	rawSince := time.Now() // its last sign of life is the handshake, after this
	raw := rawViewer(t, s, rawRoom)
	for _, p := range []*exec.Cmd{cmd, beating} {
		if err := p.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	stopSince := time.Now()

	closedAfter := func(room string, since time.Time) time.Duration {
		t.Helper()
		deadline := since.Add(wait + period + 2*time.Second) // slack for a loaded machine
		for s.hub.local(room) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("viewer of %s still connected %v after its last sign of life (pong_wait %v, ping_period %v)",
					room, time.Since(since), wait, period)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(since)
	}
	rawAfter := closedAfter(rawRoom, rawSince)
	stopAfter := closedAfter(stopRoom, stopSince)
	beatAfter := closedAfter(beatRoom, stopSince)
	t.Logf("closed %v after the raw client's handshake, %v and %v (heartbeating) after SIGSTOP", rawAfter, stopAfter, beatAfter)
	// The stopped viewers' last pong or heartbeat came about a period
	// before the stop (later on a loaded machine).
	if rawAfter < wait || stopAfter < wait/2 || beatAfter < wait/2 {
		t.Fatalf("closed too early: %v after the handshake, %v and %v after SIGSTOP (pong_wait %v)", rawAfter, stopAfter, beatAfter, wait)
	}
	// The comet closed the raw client's socket.
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, raw); err != nil {
		t.Fatalf("raw client's socket: %v, want EOF", err)
	}
	if n := s.hub.local(liveRoom); n != 1 {
		t.Fatalf("the live viewer was closed (%d viewers)", n)
	}
}

// connOf returns the first viewer of room.
func connOf(s *Server, room string) *conn {
	r := s.hub.room(room)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns[0]
}

// rawViewer opens a viewer of room by a handshake written by hand and
// reads the response; the caller then never reads or writes again.
func rawViewer(t *testing.T, s *Server, room string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.PublicAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /ws?room=%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", room, s.PublicAddr())
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 16), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if s.hub.local(room) != 1 {
			return fmt.Errorf("raw viewer not in %s", room)
		}
		return nil
	})
	return c
}

// A viewer whose client sends a heartbeat ({"op":"ping"}, answered with a
// pong frame) at least once per ping period gets no pings of the comet
// and stays past PongWait; when its heartbeats stop, the comet pings it
// again, and it stays while it answers.
func TestHeartbeatReplacesPings(t *testing.T) {
	const period, wait = 200 * time.Millisecond, time.Second
	s, _ := mustStart(t, func(c *Config) {
		c.PingPeriod = period
		c.PongWait = wait
	})
	room := testkit.Uniq("hb-")
	v := mustDial(t, s, "room="+room)
	mustReadOp(t, v, opWelcome)
	var pings atomic.Int64
	v.WS().SetPingHandler(func(data string) error {
		pings.Add(1)
		return v.WS().WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	pongs := make(chan struct{}, 100)
	go func() {
		for {
			f, _, err := v.Next(time.Minute)
			if err != nil {
				return
			}
			if f.Op == opPong {
				pongs <- struct{}{}
			}
		}
	}()
	// Let the pings of the join pass, then heartbeat for four PongWaits.
	time.Sleep(2 * period)
	stop := time.Now().Add(4 * wait)
	before := pings.Load()
	for time.Now().Before(stop) {
		v.MustSend(t, map[string]string{"op": "ping"})
		select {
		case <-pongs:
		case <-time.After(5 * time.Second):
			t.Fatal("no pong frame for a heartbeat")
		}
		time.Sleep(period / 2)
	}
	// One ping may have been due as the heartbeats began.
	if n := pings.Load() - before; n > 1 {
		t.Fatalf("pinged %d times in %v of heartbeats every %v (ping period %v)", n, 4*wait, period/2, period)
	}
	if s.hub.local(room) != 1 {
		t.Fatal("the heartbeating viewer was closed")
	}
	// Heartbeats stop: pings come again, and the viewer stays.
	before = pings.Load()
	time.Sleep(2 * wait)
	if n := pings.Load() - before; n < 5 {
		t.Fatalf("%d pings in %v without heartbeats (ping period %v)", n, 2*wait, period)
	}
	if s.hub.local(room) != 1 {
		t.Fatal("the viewer answering pings was closed")
	}
}

// Heartbeats are answered with pong frames, one each, beside other
// frames, for a viewer that sends them plain and for one whose frames are
// compressed (a browser on a connection with permessage-deflate): its
// compressed heartbeat is learned the first time and answered by the
// reader itself after that.
func TestHeartbeatAnswered(t *testing.T) {
	s, _ := mustStart(t, nil)
	for _, compress := range []bool{false, true} {
		room := testkit.Uniq("hb-")
		d := websocket.Dialer{EnableCompression: compress}
		ws, _, err := d.Dial(wsURL(s, "room="+room), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		v := wsviewer.Wrap(ws)
		mustReadOp(t, v, opWelcome)
		for range 3 {
			v.MustSend(t, map[string]string{"op": "ping"})
			mustReadOp(t, v, opPong)
		}
		// Heartbeats faster than the pongs are paid: each gets its own.
		for range 3 {
			v.MustSend(t, map[string]string{"op": "ping"})
		}
		for range 3 {
			mustReadOp(t, v, opPong)
		}
		other := testkit.Uniq("hb-")
		v.MustSend(t, map[string]string{"op": "sub", "room": other})
		v.MustSend(t, map[string]string{"op": "ping"})
		got := map[string]int{}
		for range 2 {
			got[v.MustNext(t, 5*time.Second).Op]++
		}
		if got[opWelcome] != 1 || got[opPong] != 1 {
			t.Fatalf("after a sub and a heartbeat: %v, want a welcome and a pong", got)
		}
		if l := deflatedHeartbeats.forms.Load(); compress && (l == nil || len(*l) == 0) {
			t.Fatal("the compressed heartbeat was not learned")
		}
	}
}
