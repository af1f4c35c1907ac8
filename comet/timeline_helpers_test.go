package comet

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
	"github.com/danmaku/danmaku/route"
)

// tlRoom writes a room's timeline the way job does (BeginBroadcast gives
// positions and appends to the history, EndBroadcast releases the lock)
// and returns the push bodies.
type tlRoom struct {
	tb      testing.TB
	store   *route.Store
	id      string
	head    route.Head
	n       int
	size    int    // history size; 0: route's default
	content string // message content; "" gives a short one
	// high, when set, says which messages (by number, from 1) are high
	// priority.
	high func(n int) bool
}

func newTLRoom(tb testing.TB, store *route.Store) *tlRoom {
	return &tlRoom{tb: tb, store: store, id: testkit.Uniq("tl")}
}

// write gives k new messages the room's next positions and returns the
// batch job would push.
func (w *tlRoom) write(k int) danmaku.Batch {
	w.tb.Helper()
	ctx := context.Background()
	msgs := make([]danmaku.Message, k)
	ids := make([]string, k)
	for i := range msgs {
		w.n++
		content := w.content
		if content == "" {
			content = "m" + strconv.Itoa(w.n)
		}
		msgs[i] = danmaku.Message{ID: fmt.Sprintf("%s-%d", w.id, w.n), UID: int64(w.n), Name: "n", Content: content, TS: int64(w.n)}
		if w.high != nil && w.high(w.n) {
			msgs[i].Priority = danmaku.PriorityHigh
		}
		ids[i] = msgs[i].ID
	}
	b, err := w.store.BeginBroadcast(ctx, w.id, msgs, route.BeginOptions{
		Owner: "test", ClaimTTL: 5 * time.Second, LockTTL: 5 * time.Second, HistorySize: w.size, Known: w.head})
	if err != nil || b.Status != route.Acquired {
		w.tb.Fatalf("begin broadcast %s: %v %v", w.id, b.Status, err)
	}
	for i := range msgs {
		msgs[i].Pos = b.Pos[i]
	}
	w.head = b.Head()
	if err := w.store.EndBroadcast(ctx, b.Lock, ids, time.Minute); err != nil {
		w.tb.Fatalf("end broadcast: %v", err)
	}
	out := danmaku.NewBatch(w.id, msgs)
	out.Epoch, out.Dels = b.Epoch, b.Dels
	return out
}

// wipe deletes the room's timeline, as when Redis lost its data; the next
// write starts a new epoch.
func (w *tlRoom) wipe() {
	w.tb.Helper()
	rdb := redisserver.Client(w.tb)
	if err := rdb.Del(context.Background(), "room:timeline:{"+w.id+"}", "room:history:{"+w.id+"}").Err(); err != nil {
		w.tb.Fatal(err)
	}
	w.head = route.Head{}
}

// readMsgs reads frames from ws until a msgs frame carries position
// until, and returns the msgs frames read (other frames are skipped).
func readMsgs(tb testing.TB, ws *wsviewer.Conn, until int64) []frame {
	tb.Helper()
	var out []frame
	for {
		f := mustRead(tb, ws)
		if f.Op != danmaku.OpMsgs {
			continue
		}
		out = append(out, f)
		if n := len(f.Msgs); n > 0 && f.Msgs[n-1].Pos >= until {
			return out
		}
	}
}

// positions lists the positions of the messages of frames, in order.
func positions(frames []frame) []int64 {
	var out []int64
	for _, f := range frames {
		for _, m := range f.Msgs {
			out = append(out, m.Pos)
		}
	}
	return out
}

// expectRange checks that got is exactly from, from+1, ..., to.
func expectRange(tb testing.TB, got []int64, from, to int64) {
	tb.Helper()
	if err := checkRange(got, from, to); err != nil {
		tb.Fatal(err)
	}
}

func checkRange(got []int64, from, to int64) error {
	ok := int64(len(got)) == to-from+1
	for i := 0; ok && i < len(got); i++ {
		ok = got[i] == from+int64(i)
	}
	if !ok {
		return fmt.Errorf("positions %s, want %d..%d", short(got), from, to)
	}
	return nil
}

func short(p []int64) string {
	if len(p) > 40 {
		return fmt.Sprint(p[:20]) + "..." + fmt.Sprint(p[len(p)-20:])
	}
	return fmt.Sprint(p)
}

// joinWelcome dials the comet into room (extra: more query) and returns
// the connection and its welcome.
func joinWelcome(tb testing.TB, s *Server, room, extra string) (*wsviewer.Conn, frame) {
	tb.Helper()
	q := "room=" + room
	if extra != "" {
		q += "&" + extra
	}
	ws := mustDial(tb, s, q)
	return ws, mustReadOp(tb, ws, opWelcome)
}

func resumeQuery(epoch string, since int64) string {
	return "since=" + strconv.FormatInt(since, 10) + "&epoch=" + epoch
}

// expectValue waits for a counter to read want: joins and catch-ups are
// counted just after their frames are queued, so a viewer may read the
// frame first.
func expectValue(tb testing.TB, c prometheus.Metric, want float64, what string) {
	tb.Helper()
	testkit.SucceedsSoon(tb, 2*time.Second, func() error {
		if got := value(tb, c); got != want {
			return fmt.Errorf("%s %v, want %v", what, got, want)
		}
		return nil
	})
}
