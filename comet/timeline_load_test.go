package comet

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// stormViewers is the number of viewers of the resume storm test;
// STORM_VIEWERS raises it for a measurement.
func stormViewers(tb testing.TB) int {
	if v, err := strconv.Atoi(os.Getenv("STORM_VIEWERS")); err == nil && v > 0 {
		return v
	}
	return 300
}

// Viewers resuming within a short time (one per millisecond, at most 2 s)
// on a comet that never held their room cost a handful of Redis reads in
// all, not one per viewer, and each gets exactly what it missed.
func TestResumeStormSingleFlight(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.GapCheck = 0; c.RedisTimeout = 10 * time.Second })
	w := newTLRoom(t, store)
	w.write(500)
	n := stormViewers(t)
	before := redisserver.CommandCalls(t, redisserver.Client(t))["llen"] // only the history script calls LLEN
	start := time.Now()
	errs := make(chan error, n)
	hold := make(chan struct{}) // viewers stay until all caught up
	var wg sync.WaitGroup
	spread := min(2*time.Second, time.Duration(n)*time.Millisecond) // arrivals within 2 s
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(spread * time.Duration(i) / time.Duration(n))
			errs <- stormViewer(s, w.id, w.head.Epoch, int64(100+i%400), 500, hold)
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	close(hold)
	wg.Wait()
	reads := redisserver.CommandCalls(t, redisserver.Client(t))["llen"] - before
	t.Logf("%d viewers resumed and caught up in %v with %d history reads (join %v, backfill %v)", n, took, reads,
		value(t, s.metrics.historyReads.WithLabelValues(repairJoin)), value(t, s.metrics.historyReads.WithLabelValues("backfill")))
	if reads < 1 || reads > 4 {
		t.Errorf("%d history reads for %d resuming viewers, want 1..4", reads, n)
	}
	expectValue(t, s.metrics.resumes.WithLabelValues("recovered"), float64(n), "recovered resumes")
}

// stormViewer resumes in room after since and checks it gets
// since+1..last; it stays connected until hold is closed (nil: not at all).
func stormViewer(s *Server, room, epoch string, since, last int64, hold chan struct{}) error {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	ws, _, err := d.Dial(wsURL(s, "room="+room+"&"+resumeQuery(epoch, since)), nil)
	if err != nil {
		return err
	}
	err = readResume(wsviewer.Wrap(ws), since, last)
	if hold == nil || err != nil {
		ws.Close()
		return err
	}
	go func() { <-hold; ws.Close() }()
	return nil
}

// readResume reads a resume's welcome and frames up to position last.
func readResume(ws *wsviewer.Conn, since, last int64) error {
	end := time.Now().Add(20 * time.Second)
	sf, _, err := ws.Next(time.Until(end))
	if err != nil {
		return err
	}
	wel := flat(sf)
	if wel.Op != opWelcome || wel.Recovered == nil || !*wel.Recovered {
		return fmt.Errorf("welcome %+v, want recovered", wel)
	}
	var got []int64
	for len(got) == 0 || got[len(got)-1] < last {
		sf, _, err := ws.Next(time.Until(end))
		if err != nil {
			return err
		}
		got = append(got, positions([]frame{flat(sf)})...)
	}
	return checkRange(got, since+1, last)
}

// The seam: viewers resuming while messages flow each see every message
// after their position exactly once, in order.
func TestResumeSeamWhilePushing(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { c.GapCheck = 0 })
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	var head atomic.Int64
	mustPush(t, p, s, w.write(50))
	head.Store(50)
	epoch := w.head.Epoch
	watcher, _ := joinWelcome(t, s, w.id, "") // keeps the room on the comet
	defer watcher.Close()
	const total = 600
	done := make(chan struct{})
	go func() { // 500 msg/s in batches of 10
		defer close(done)
		for head.Load() < total {
			b := w.write(10)
			body, _ := json.Marshal(b)
			if _, err := p.Push(context.Background(), s.AdvertiseAddr(), body); err != nil {
				t.Errorf("push: %v", err)
				return
			}
			head.Store(w.head.Last)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	errs := make(chan error, 60)
	var wg sync.WaitGroup
	for range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(900)) * time.Millisecond)
			since := max(0, head.Load()-int64(rand.IntN(40)))
			errs <- stormViewer(s, w.id, epoch, since, total, nil)
		}()
	}
	wg.Wait()
	<-done
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// smallBufferDialer dials viewers whose socket receive buffer is tiny, so
// a viewer that does not read backs the comet's writes up at once.
var smallBufferDialer = websocket.Dialer{
	HandshakeTimeout: 5 * time.Second,
	NetDial: func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			return serr
		}}
		return d.Dial(network, addr)
	},
}

func dialSmall(tb testing.TB, s *Server, room string) *wsviewer.Conn {
	tb.Helper()
	ws, _, err := smallBufferDialer.Dial(wsURL(s, "room="+room), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ws.Close() })
	mustReadOp(tb, wsviewer.Wrap(ws), opWelcome)
	return wsviewer.Wrap(ws)
}

// slowConfig makes writes to a viewer that does not read block quickly.
func slowConfig(c *Config) {
	c.QueueSize = 4
	c.SendBuffer = 4096
	c.GapCheck = 0
	c.HistoryOnJoin = 0
}

// A viewer too slow for its queue is caught up from the ring once it reads
// again, and gets every message once, in order, the high-priority ones
// still marked; beyond the ring it is closed with 4008. Both are counted.
func TestSlowViewerCaughtUp(t *testing.T) {
	s, store := mustStart(t, func(c *Config) { slowConfig(c); c.WriteWait = 10 * time.Second })
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	w.content = strings.Repeat("x", 4000)
	w.high = everyFifth
	ws := dialSmall(t, s, w.id)
	for range 40 {
		mustPush(t, p, s, w.write(1))
	}
	time.Sleep(300 * time.Millisecond)
	frames := readMsgs(t, ws, 40)
	expectRange(t, positions(frames), 1, 40)
	checkLanes(t, frames)
	replayed := 0
	for _, f := range frames {
		if f.Replay {
			replayed++
		}
	}
	testkit.SucceedsSoon(t, 2*time.Second, func() error {
		if replayed == 0 || value(t, s.metrics.catchUps) < 1 || value(t, s.metrics.slowConsumers) != 0 {
			return fmt.Errorf("catch-up frames %d, catch-ups %v, cuts %v", replayed, value(t, s.metrics.catchUps), value(t, s.metrics.slowConsumers))
		}
		return nil
	})
	// Still a viewer: live frames go on.
	mustPush(t, p, s, w.write(1))
	expectRange(t, positions(readMsgs(t, ws, 41)), 41, 41)

	small, _ := mustStart(t, func(c *Config) { slowConfig(c); c.RingSize = 16; c.WriteWait = 10 * time.Second })
	w2 := newTLRoom(t, store)
	w2.content = w.content
	ws2 := dialSmall(t, small, w2.id)
	for range 60 {
		mustPush(t, p, small, w2.write(1))
	}
	time.Sleep(300 * time.Millisecond)
	// The raw socket: read until the comet cuts the connection.
	ws2.WS().SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := ws2.WS().ReadMessage()
		if err == nil {
			continue
		}
		if !websocket.IsCloseError(err, CloseSlowConsumer) {
			t.Fatalf("read: %v, want close %d", err, CloseSlowConsumer)
		}
		break
	}
	if value(t, small.metrics.slowConsumers) != 1 {
		t.Errorf("cuts %v, want 1", value(t, small.metrics.slowConsumers))
	}
}

// A viewer that stops reading but stays alive (it sends a pong every
// 100 ms while the comet pings every 300 ms, and pong_wait is long) is cut
// within write_wait (plus a second) once its bounded socket buffer is
// full, and the room's other viewers get every message meanwhile.
func TestNeverReadingViewerCut(t *testing.T) {
	const writeWait = time.Second
	s, store := mustStart(t, func(c *Config) {
		slowConfig(c)
		c.QueueSize, c.WriteWait, c.PingPeriod = 64, writeWait, 300*time.Millisecond
	})
	p := push.NewClient(testSecret, 2*time.Second)
	w := newTLRoom(t, store)
	w.content = strings.Repeat("y", 4000)
	go answerPings(dialSmall(t, s, w.id)) // never reads
	good, _ := joinWelcome(t, s, w.id, "")
	got := make(chan error, 1)
	go func() {
		var pos []int64
		for len(pos) == 0 || pos[len(pos)-1] < 150 {
			sf, _, err := good.Next(10 * time.Second)
			if err != nil {
				got <- err
				return
			}
			f := flat(sf)
			pos = append(pos, positions([]frame{f})...)
		}
		got <- checkRange(pos, 1, 150)
	}()
	start := time.Now()
	var cut time.Duration
	for i := range 150 {
		mustPush(t, p, s, w.write(1))
		if cut == 0 && s.hub.local(w.id) == 1 {
			cut = time.Since(start)
		}
		if i%5 == 4 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	testkit.SucceedsSoon(t, 5*time.Second, func() error {
		if cut == 0 && s.hub.local(w.id) == 1 {
			cut = time.Since(start)
		}
		if cut == 0 {
			return fmt.Errorf("the viewer that never reads is still connected after %v", time.Since(start))
		}
		return nil
	})
	if cut > writeWait+time.Second {
		t.Errorf("cut after %v, want within %v", cut, writeWait+time.Second)
	}
	if err := <-got; err != nil {
		t.Errorf("the reading viewer: %v", err)
	}
}

// answerPings writes a pong on ws every 100 ms until a write fails,
// without reading: to the comet, a client that answers its pings.
func answerPings(ws *wsviewer.Conn) {
	for {
		time.Sleep(100 * time.Millisecond)
		// The raw socket: a pong without reading anything.
		if ws.WS().WriteControl(websocket.PongMessage, nil, time.Now().Add(time.Second)) != nil {
			return
		}
	}
}
