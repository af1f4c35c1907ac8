//go:build linux

package comet

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
)

// BenchmarkWire weighs permessage-deflate: the CPU a comet spends per
// delivery (one frame written to one viewer) against the bytes on the wire
// per delivered comment, plain and compressed. A frame is encoded and
// compressed once (a PreparedMessage, as the comet's fan-out makes one per
// tier and batch) and written to wireViewers sockets whose far ends only
// count the bytes. Frame sizes: 6 comments (a 30/s tier's frame of a
// 200 ms window), 30 (its held frame of a second, density_flush), 40, and 200 (every message of a 1,000 a second room in a
// 200 ms window). The comments look like the load tool's (logic's ids,
// "lt:<seq>:<unix ns>" contents), so the figures compare with
// scripts/bench.sh runs. ns/delivery includes the frame's encoding and
// compression spread over its deliveries; cpu-ns/delivery is the same
// counted in CPU time of the writing thread (user and system), which the
// rest of a busy machine does not inflate.
func BenchmarkWire(b *testing.B) {
	for _, n := range []int{6, 30, 40, 200} {
		for _, deflate := range []bool{false, true} {
			b.Run(fmt.Sprintf("comments=%d/deflate=%v", n, deflate), func(b *testing.B) { benchWire(b, n, deflate) })
		}
	}
}

const wireViewers = 200

func benchWire(b *testing.B, n int, deflate bool) {
	conns := make(chan *websocket.Conn, wireViewers)
	up := websocket.Upgrader{EnableCompression: deflate, WriteBufferPool: &sync.Pool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err == nil {
			conns <- ws
		}
	}))
	defer srv.Close()
	var wire atomic.Int64
	d := websocket.Dialer{EnableCompression: deflate}
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	server := make([]*websocket.Conn, 0, wireViewers)
	for range wireViewers {
		c, _, err := d.Dial(url, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		// The viewer's side counts raw bytes and decodes nothing.
		go io.Copy(io.Discard, countReader{c.NetConn(), &wire})
		server = append(server, <-conns)
	}
	batches := make([][]byte, 64)
	for i := range batches {
		batches[i], _ = json.Marshal(wireBatch(i, n))
	}
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	cpu0 := threadCPU(b)
	start := time.Now()
	var payload int
	for i := 0; i < b.N; i++ {
		data := batches[i%len(batches)]
		payload += len(data)
		pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
		if err != nil {
			b.Fatal(err)
		}
		for _, ws := range server {
			if err := ws.WritePreparedMessage(pm); err != nil {
				b.Fatal(err)
			}
		}
	}
	el := time.Since(start)
	cpu := threadCPU(b) - cpu0
	b.StopTimer()
	for last := int64(-1); last != wire.Load(); {
		last = wire.Load()
		time.Sleep(50 * time.Millisecond)
	}
	deliveries := float64(b.N) * wireViewers
	b.ReportMetric(float64(el.Nanoseconds())/deliveries, "ns/delivery")
	b.ReportMetric(float64(cpu)/deliveries, "cpu-ns/delivery")
	b.ReportMetric(float64(wire.Load())/deliveries/float64(n), "wire-B/comment")
	b.ReportMetric(float64(payload)/float64(b.N)/float64(n), "json-B/comment")
}

// threadCPU is the CPU time (user and system) of the calling OS thread in
// nanoseconds: what the writing loop itself costs, whatever else the
// machine runs meanwhile.
func threadCPU(tb testing.TB) int64 {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		tb.Fatalf("clock_gettime: %v", e)
	}
	return ts.Nano()
}

type countReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// wireBatch is frame k of n comments shaped like the load tool's.
func wireBatch(k, n int) danmaku.Batch {
	msgs := make([]danmaku.Message, n)
	base := time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)
	for i := range msgs {
		seq := k*n + i
		ts := base.Add(time.Duration(seq) * time.Millisecond)
		msgs[i] = danmaku.Message{
			ID:  strconv.FormatInt(ts.UnixMilli()<<16|int64(seq&0xffff), 32),
			UID: int64(1 + seq*7919%10000), Name: "lt",
			Content: "lt:" + strconv.Itoa(seq) + ":" + strconv.FormatInt(ts.UnixNano()+int64(seq%997)*1013, 10),
			TS:      ts.UnixMilli(), Pos: int64(seq + 1),
		}
	}
	b := danmaku.NewBatch("video_123", msgs)
	b.Epoch = "9f2c41d07a3b5e68"
	return b
}
