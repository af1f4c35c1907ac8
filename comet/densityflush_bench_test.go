package comet

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
)

// BenchmarkDensityFlush weighs held frames of capped tiers: 2,000 viewers
// capped at 30 a second, their client sockets in a separate process
// (internal/tools/idleload -mode clients), one room at 2,000 normal
// messages a second pushed in 200 ms batches as job does, with
// density_flush 0 (a frame per batch) and 1s, without high-priority
// messages and with one in every batch (5 a second, D1's high lane). An
// iteration is one second of the room; run it with -benchtime 10x. It
// reports the comet's CPU per viewer-second (this process's user and
// system time: the comet and the pushes, which it decodes and thins once
// per tier) and the frames written per viewer-second.
func BenchmarkDensityFlush(b *testing.B) {
	for _, flush := range []time.Duration{0, time.Second} {
		for _, high := range []bool{false, true} {
			b.Run(fmt.Sprintf("flush=%v/high=%v", flush, high), func(b *testing.B) { benchFlush(b, 2000, flush, high) })
		}
	}
}

func benchFlush(b *testing.B, n int, flush time.Duration, high bool) {
	s, _ := mustStart(b, func(c *Config) { c.DensityFlush = flush })
	room := testkit.Uniq("held-")
	// idleload puts -room in the URL as is: the viewers ask for 30 a second.
	defer peerViewers(b, s, room, n, "-mode", "clients", "-addr", s.PublicAddr(), "-n", strconv.Itoa(n), "-room", room+"&density=30")()
	const perBatch = 400 // 2,000 a second in 200 ms batches
	pos := int64(0)
	next := func(hi bool) danmaku.Batch {
		now := time.Now().UnixMilli()
		msgs := make([]danmaku.Message, perBatch)
		for i := range msgs {
			pos++
			msgs[i] = danmaku.Message{ID: room + "-" + strconv.FormatInt(pos, 10), UID: 100 + pos%1000, Name: "viewer",
				Content: "a comment of the usual length, about thirty", TS: now - int64(perBatch-1-i)/2, Pos: pos}
		}
		if hi {
			msgs[perBatch-1].Priority = danmaku.PriorityHigh
		}
		bt := danmaku.NewBatch(room, msgs)
		bt.Epoch = "e-" + room
		return bt
	}
	for range 10 { // warm up: the room's rate is known, the tiers thin
		s.Broadcast(next(false))
		time.Sleep(200 * time.Millisecond)
	}
	frames := value(b, s.metrics.framesWritten)
	cpu := processCPU(b)
	start := time.Now()
	b.ResetTimer()
	for i := range b.N * 5 {
		s.Broadcast(next(high))
		time.Sleep(time.Until(start.Add(time.Duration(i+1) * 200 * time.Millisecond)))
	}
	b.StopTimer()
	time.Sleep(300 * time.Millisecond) // the writes of the last batch
	vs := float64(n) * time.Since(start).Seconds()
	b.ReportMetric(float64(processCPU(b)-cpu)/1e3/vs, "µs/viewer-s")
	b.ReportMetric((value(b, s.metrics.framesWritten)-frames)/vs, "frames/viewer-s")
}

// processCPU is this process's user and system time so far, in ns.
func processCPU(tb testing.TB) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
