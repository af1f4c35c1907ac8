package comet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// benchBatch is a batch of 20 comments, about 2 KiB as a frame.
func benchBatch(room string, seq int) danmaku.Batch {
	msgs := make([]danmaku.Message, 20)
	for i := range msgs {
		msgs[i] = danmaku.Message{
			ID: fmt.Sprintf("b%d-%d", seq, i), UID: int64(1000 + i), Name: "viewer" + strconv.Itoa(i),
			Content: "a comment of ordinary length, 666 888", TS: 1730620801123 + int64(i),
		}
	}
	return danmaku.NewBatch(room, msgs)
}

// BenchmarkPush measures one push round trip: Pusher -> internal HTTP
// listener -> fan-out to one viewer -> {"delivered":1}. keepalive is the
// Pusher as shipped; new-conn dials a connection per push, which is what
// the tuned transport avoids; parallel pushes from 8 goroutines per CPU at
// once over the pooled connections.
func BenchmarkPush(b *testing.B) {
	s, _ := mustStart(b, nil)
	room := testkit.Uniq("r-")
	c := mustDial(b, s, "room="+room)
	mustReadOp(b, c, opWelcome)
	go func() {
		for {
			// The raw socket: frames drained without decoding them.
			if _, r, err := c.WS().NextReader(); err != nil {
				return
			} else {
				io.Copy(io.Discard, r)
			}
		}
	}()
	var seq atomic.Int64
	body := func() []byte {
		bb, _ := json.Marshal(benchBatch(room, int(seq.Add(1))))
		return bb
	}
	run := func(b *testing.B, p *push.Client) {
		ctx := context.Background()
		bodies := make([][]byte, b.N)
		for i := range bodies {
			bodies[i] = body()
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if n, err := p.Push(ctx, s.AdvertiseAddr(), bodies[i]); err != nil || n != 1 {
				b.Fatalf("push %d: %d %v (local %d)", i, n, err, s.hub.local(room))
			}
		}
	}
	b.Run("keepalive", func(b *testing.B) {
		p := push.NewClient(testSecret, 2*time.Second)
		defer p.Close()
		b.ReportAllocs()
		run(b, p)
	})
	b.Run("new-conn", func(b *testing.B) {
		p := push.NewClient(testSecret, 2*time.Second)
		p.Transport().DisableKeepAlives = true
		defer p.Close()
		b.ReportAllocs()
		run(b, p)
	})
	b.Run("keepalive-parallel", func(b *testing.B) {
		p := push.NewClient(testSecret, 2*time.Second)
		defer p.Close()
		b.ReportAllocs()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if _, err := p.Push(ctx, s.AdvertiseAddr(), body()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkFanOut measures one batch to every viewer of a room: Broadcast
// returns after the non-blocking enqueue; an iteration ends when every
// viewer's frame was written to its socket (danmaku_comet_frames_written_total).
//
// peer=10000: 10,000 viewers whose client sockets live in a separate
// process (internal/tools/idleload -mode clients), so this process holds
// 10,000 server sockets and every allocation counted is the comet's own.
// inproc=5000: 5,000 viewers with both ends in this process (10,000 fds);
// the client readers' work and allocations are included. The deflate
// variants negotiate permessage-deflate with every viewer: the frame is
// compressed once per batch (PreparedMessage caches it per mode), so the
// cost per delivery stays that of a plain write.
func BenchmarkFanOut(b *testing.B) {
	b.Run("peer=10000", func(b *testing.B) { benchPeer(b, 10000, false) })
	b.Run("peer=10000/deflate", func(b *testing.B) { benchPeer(b, 10000, true) })
	b.Run("inproc=5000", func(b *testing.B) { benchInProc(b, 5000) })
}

var (
	idleloadOnce sync.Once
	idleloadBin  string
	idleloadErr  error
)

// buildIdleload builds the viewer program once per test binary.
func buildIdleload(tb testing.TB) string {
	idleloadOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idleload")
		if err != nil {
			idleloadErr = err
			return
		}
		idleloadBin = filepath.Join(dir, "idleload")
		out, err := exec.Command("go", "build", "-o", idleloadBin, "../internal/tools/idleload").CombinedOutput()
		if err != nil {
			idleloadErr = fmt.Errorf("build idleload: %v\n%s", err, out)
		}
	})
	if idleloadErr != nil {
		tb.Fatal(idleloadErr)
	}
	return idleloadBin
}

// removeIdleload removes the viewer program built for this test binary.
func removeIdleload() {
	if idleloadBin != "" {
		os.RemoveAll(filepath.Dir(idleloadBin))
	}
}

func benchPeer(b *testing.B, n int, deflate bool) {
	s, _ := mustStart(b, func(c *Config) { c.Compression = deflate })
	room := testkit.Uniq("fan-")
	args := []string{"-mode", "clients", "-addr", s.PublicAddr(), "-n", strconv.Itoa(n), "-room", room}
	if deflate {
		args = append(args, "-compress")
	}
	defer peerViewers(b, s, room, n, args...)()
	runFanOut(b, s, room, n)
}

// peerViewers runs idleload with args in a process of its own, waits
// until its n viewers are in room and returns what stops it.
func peerViewers(tb testing.TB, s *Server, room string, n int, args ...string) (stop func()) {
	cmd := exec.Command(buildIdleload(tb), args...)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	stop = func() { stdin.Close(); cmd.Wait() }
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "CONNECTED") {
	}
	if got := s.hub.local(room); got != n {
		stop()
		tb.Fatalf("%d viewers in the room, want %d (%s)", got, n, sc.Text())
	}
	return stop
}

func benchInProc(b *testing.B, n int) {
	s, _ := mustStart(b, nil)
	room := testkit.Uniq("fan-")
	var received atomic.Int64
	conns := make([]*wsviewer.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		d := websocket.Dialer{
			NetDial:         (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%20))}}).Dial,
			ReadBufferSize:  4096,
			WriteBufferSize: 256,
		}
		c, _, err := d.Dial(wsURL(s, "room="+room), nil)
		if err != nil {
			b.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, wsviewer.Wrap(c))
		mustReadOp(b, wsviewer.Wrap(c), opWelcome)
		c.SetReadDeadline(time.Time{})
		go func() {
			buf := make([]byte, 4096)
			for {
				_, r, err := c.NextReader()
				if err != nil {
					return
				}
				for {
					if _, err := r.Read(buf); err != nil {
						break
					}
				}
				received.Add(1)
			}
		}()
	}
	runFanOut(b, s, room, n)
}

// runFanOut broadcasts b.N batches, each after the previous one reached
// every viewer's socket, and reports the rates.
func runFanOut(b *testing.B, s *Server, room string, n int) {
	batches := make([]danmaku.Batch, b.N)
	for i := range batches {
		batches[i] = benchBatch(room, i)
	}
	base := value(b, s.metrics.framesWritten)
	b.ReportAllocs()
	b.ResetTimer()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for i := range batches {
		if got := s.Broadcast(batches[i]); got != n {
			b.Fatalf("batch %d reached %d viewers, want %d", i, got, n)
		}
		want := base + float64((i+1)*n)
		for value(b, s.metrics.framesWritten) < want {
			time.Sleep(20 * time.Microsecond)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*n), "allocs/delivery")
	b.ReportMetric(float64(b.N)/el.Seconds(), "batches/s")
	b.ReportMetric(float64(b.N*n)/el.Seconds(), "frames/s")
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N*n), "ns/delivery")
	if v := value(b, s.metrics.slowConsumers); v != 0 {
		b.Fatalf("%v slow consumers", v)
	}
}
