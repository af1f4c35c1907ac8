package comet

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/push"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/tokens"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// densityFeed is a room's timeline for density tests: n messages at
// rate a second (server times spaced accordingly), in batches of size,
// every highEvery-th one high priority and every ownEvery-th one sent by
// uid ownUID.
type densityFeed struct {
	room, epoch string
	msgs        []danmaku.Message
	size        int
}

const ownUID = 7

func newDensityFeed(room string, n, rate, size int) densityFeed {
	f := densityFeed{room: room, epoch: "e" + room, size: size}
	base := time.Now().UnixMilli()
	for i := range n {
		m := danmaku.Message{ID: fmt.Sprintf("%s-%06d", room, i), UID: int64(100 + i%50), Name: "n",
			Content: "c", TS: base + int64(i*1000/rate), Pos: int64(i + 1)}
		if i%97 == 13 {
			m.UID = ownUID
		}
		if i%250 == 7 {
			m.Priority = danmaku.PriorityHigh
		}
		f.msgs = append(f.msgs, m)
	}
	return f
}

// batch returns the k-th batch of the feed.
func (f densityFeed) batch(k int) danmaku.Batch {
	b := danmaku.NewBatch(f.room, f.msgs[k*f.size:min(len(f.msgs), (k+1)*f.size)])
	b.Epoch = f.epoch
	return b
}

func (f densityFeed) batches() int { return (len(f.msgs) + f.size - 1) / f.size }

// got is what a viewer received of a room: messages in order, and the
// skipped counts of its frames.
type got struct {
	msgs    []danmaku.Message
	skipped int64
	frames  []frame
}

func (g got) ids() []string {
	out := make([]string, len(g.msgs))
	for i, m := range g.msgs {
		out[i] = m.ID
	}
	return out
}

// collect reads ws in the background, so its queue never fills, and
// returns a function that waits until no frame came for quiet and returns
// the msgs frames read so far.
func collect(tb testing.TB, ws *wsviewer.Conn) func(quiet time.Duration) got {
	frames := make(chan frame, 1024)
	go func() {
		defer close(frames)
		for {
			f, _, err := ws.Next(time.Minute)
			if err != nil {
				return
			}
			if f.Msgs != nil {
				frames <- flat(f)
			}
		}
	}()
	var g got
	return func(quiet time.Duration) got {
		for {
			select {
			case f, ok := <-frames:
				if !ok {
					return g
				}
				g.msgs = append(g.msgs, f.Msgs...)
				g.skipped += f.Skipped
				g.frames = append(g.frames, f)
			case <-time.After(quiet):
				return g
			}
		}
	}
}

// TestDensityTiers runs one room on two comets with viewers of the all
// tier and of the 10/s tier (one of them compressed, one the sender of
// some of the room's messages) and checks: the all tier gets every message
// once; the 10/s tier gets the same subset on both comets, about 10 normal
// messages a second, every high-priority message, and skipped counts that
// add up to what it did not get; the sender gets its own messages too; a
// capped viewer that resumes on the other comet gets its tier's subset of
// what it missed, so its messages are those of a viewer that stayed.
func TestDensityTiers(t *testing.T) {
	a, _ := mustStart(t, func(c *Config) { c.Compression = true })
	b, _ := mustStart(t, func(c *Config) { c.Compression = true })
	room := testkit.Uniq("dens-")
	feed := newDensityFeed(room, 10000, 1000, 100)

	all := mustDial(t, a, "room="+room)
	capA := mustDial(t, a, fmt.Sprintf("room=%s&density=10&uid=%d", room, ownUID))
	d := websocket.Dialer{EnableCompression: true}
	capWS, resp, err := d.Dial(wsURL(b, "room="+room+"&density=10"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer capWS.Close()
	capB := wsviewer.Wrap(capWS)
	if !strings.Contains(resp.Header.Get("Sec-Websocket-Extensions"), "permessage-deflate") {
		t.Fatalf("compression not negotiated: %v", resp.Header)
	}
	leaver := mustDial(t, a, "room="+room+"&density=12")
	for _, ws := range []*wsviewer.Conn{all, capA, capB, leaver} {
		if w := mustReadOp(t, ws, opWelcome); ws != all && w.Density != 10 {
			t.Fatalf("welcome of a capped viewer: density %d, want 10", w.Density)
		}
	}
	readAll, readA, readB, readLeaver := collect(t, all), collect(t, capA), collect(t, capB), collect(t, leaver)

	p := push.NewClient(testSecret, 5*time.Second)
	defer p.Close()
	// The comets get the messages in different batches: the choice
	// depends on the positions, not on how they came.
	pushAll := func(from, to int) {
		for k := from; k < to; k++ {
			mustPush(t, p, a, feed.batch(k))
			whole := feed.batch(k)
			for _, part := range [][]danmaku.Message{whole.Msgs[:feed.size/3], whole.Msgs[feed.size/3:]} {
				mustPush(t, p, b, danmaku.Batch{Op: danmaku.OpMsgs, Room: room, Epoch: feed.epoch, Msgs: part})
			}
		}
	}
	half := feed.batches() / 2
	pushAll(0, half)
	before := readLeaver(500 * time.Millisecond)
	leaver.Close()
	pushAll(half, feed.batches())
	// One more high-priority message: every tier's frame carries what it
	// left out since its last one.
	tail := danmaku.NewBatch(room, []danmaku.Message{{ID: room + "-tail", UID: 1, Name: "n", Content: "c",
		TS: feed.msgs[len(feed.msgs)-1].TS + 1, Pos: int64(len(feed.msgs) + 1), Priority: danmaku.PriorityHigh}})
	tail.Epoch = feed.epoch
	feed.msgs = append(feed.msgs, tail.Msgs[0])
	mustPush(t, p, a, tail)
	mustPush(t, p, b, tail)

	gotAll := readAll(500 * time.Millisecond)
	gotA := readA(500 * time.Millisecond)
	gotB := readB(500 * time.Millisecond)
	checkAllTier(t, gotAll, feed)
	checkTier(t, gotB, feed, 10)
	mine, others := splitOwn(gotA, gotB)
	if !slices.Equal(others, gotB.ids()) {
		t.Fatalf("the 10/s tier differs between comets: %d messages on one, %d on the other", len(others), len(gotB.ids()))
	}
	for _, m := range feed.msgs {
		if m.UID == ownUID && !slices.Contains(gotA.ids(), m.ID) {
			t.Fatalf("the sender's own message %s did not reach it", m.ID)
		}
	}
	t.Logf("10/s tier: %d of %d messages, %d skipped; the sender also got %d of its own", len(gotB.msgs), len(feed.msgs), gotB.skipped, len(mine))
	checkThinCounts(t, a, b, gotB, feed)

	// The leaver resumes on the other comet after the last position it got.
	last := before.msgs[len(before.msgs)-1].Pos
	back := mustDial(t, b, fmt.Sprintf("room=%s&density=10&since=%d&epoch=%s", room, last, feed.epoch))
	if w := mustReadOp(t, back, opWelcome); w.Recovered == nil || !*w.Recovered {
		t.Fatalf("resume not recovered: %+v", w)
	}
	after := collect(t, back)(500 * time.Millisecond)
	if ids := append(before.ids(), after.ids()...); !slices.Equal(ids, gotB.ids()) {
		t.Fatalf("a resumed viewer of the 10/s tier got %d messages, one that stayed %d", len(ids), len(gotB.ids()))
	}
}

// checkThinCounts checks the comets' counts of what their tiers' frames
// kept and left out of the feed's normal messages: once per batch and
// tier, on a, which has viewers of both tiers, and on b, only of the 10/s
// tier, whose frames are g's.
func checkThinCounts(t *testing.T, a, b *Server, g got, feed densityFeed) {
	t.Helper()
	var normal, kept float64
	for _, m := range feed.msgs {
		if m.Priority != danmaku.PriorityHigh {
			normal++
		}
	}
	for _, m := range g.msgs {
		if m.Priority != danmaku.PriorityHigh {
			kept++
		}
	}
	for _, c := range []struct {
		s                    *Server
		tier                 string
		kept, skipped        float64
		otherKept, otherSkip float64
	}{
		{a, "all", normal, 0, 0, 0},
		{a, "10", kept, normal - kept, 0, 0},
		{b, "10", kept, normal - kept, 0, 0},
		{b, "all", 0, 0, 0, 0},
		{b, "30", 0, 0, 0, 0},
	} {
		m := c.s.metrics
		if k, sk := value(t, m.densityKept.WithLabelValues(c.tier)), value(t, m.densitySkipped.WithLabelValues(c.tier)); k != c.kept || sk != c.skipped {
			t.Errorf("tier %s: kept %v, skipped %v; want %v, %v", c.tier, k, sk, c.kept, c.skipped)
		}
	}
}

// splitOwn returns the ids of a (a sender of ownUID) beyond b's: its own
// messages its tier left out, and the rest.
func splitOwn(a, b got) (mine, others []string) {
	inB := map[string]bool{}
	for _, id := range b.ids() {
		inB[id] = true
	}
	for _, m := range a.msgs {
		if m.UID == ownUID && !inB[m.ID] {
			mine = append(mine, m.ID)
		} else {
			others = append(others, m.ID)
		}
	}
	return mine, others
}

func checkAllTier(t *testing.T, g got, feed densityFeed) {
	t.Helper()
	if len(g.msgs) != len(feed.msgs) || g.skipped != 0 {
		t.Fatalf("all tier: %d messages, %d skipped; want %d, 0", len(g.msgs), g.skipped, len(feed.msgs))
	}
	for i, m := range g.msgs {
		if m.ID != feed.msgs[i].ID {
			t.Fatalf("all tier: message %d is %s, want %s", i, m.ID, feed.msgs[i].ID)
		}
	}
}

// checkTier checks a capped viewer's messages: in order, every high one,
// normal ones at capacity a second within 5 % in every full 10 s window
// of server time from the room's first message (the first included: the
// room starts busy), and skipped counts that account for the rest.
func checkTier(t *testing.T, g got, feed densityFeed, capacity int) {
	t.Helper()
	var high, normal int
	base := feed.msgs[0].TS
	wins := make([]int, (feed.msgs[len(feed.msgs)-1].TS-base+1)/10000)
	for i, m := range g.msgs {
		if i > 0 && m.Pos <= g.msgs[i-1].Pos {
			t.Fatalf("positions out of order: %d after %d", m.Pos, g.msgs[i-1].Pos)
		}
		if m.Priority == danmaku.PriorityHigh {
			high++
			continue
		}
		normal++
		if w := int((m.TS - base) / 10000); w < len(wins) {
			wins[w]++
		}
	}
	var wantHigh int
	for _, m := range feed.msgs {
		if m.Priority == danmaku.PriorityHigh {
			wantHigh++
		}
	}
	if high != wantHigh {
		t.Fatalf("%d high-priority messages, want all %d", high, wantHigh)
	}
	if int64(normal)+g.skipped != int64(len(feed.msgs)-wantHigh) {
		t.Fatalf("%d normal messages + %d skipped, want %d", normal, g.skipped, len(feed.msgs)-wantHigh)
	}
	if len(wins) == 0 {
		t.Fatal("the feed spans no full 10 s window")
	}
	for w, n := range wins {
		if rate := float64(n) / 10; rate > 1.05*float64(capacity) || rate < 0.95*float64(capacity) {
			t.Fatalf("window %d: %.2f normal messages a second, want %d within 5%%", w+1, rate, capacity)
		}
		t.Logf("window %d: %.2f normal messages a second", w+1, float64(n)/10)
	}
}

// TestDensityLive changes a viewer's cap with the density op: the answer
// names the tier, and the next frame is the new tier's. An op for a room
// the viewer does not hold, a bad cap and a bad URL parameter are refused.
func TestDensityLive(t *testing.T) {
	s, _ := mustStart(t, nil)
	room := testkit.Uniq("live-")
	feed := newDensityFeed(room, 3000, 1000, 1000)
	v := mustDial(t, s, "room="+room+"&density=10")
	ref := mustDial(t, s, "room="+room+"&density=30")
	mustReadOp(t, v, opWelcome)
	mustReadOp(t, ref, opWelcome)
	p := push.NewClient(testSecret, 5*time.Second)
	defer p.Close()
	mustPush(t, p, s, feed.batch(0))
	if a, b := mustReadOp(t, v, danmaku.OpMsgs), mustReadOp(t, ref, danmaku.OpMsgs); len(a.Msgs) >= len(b.Msgs) {
		t.Fatalf("10/s tier got %d messages, 30/s %d", len(a.Msgs), len(b.Msgs))
	}

	mustSend(t, v, map[string]any{"op": "density", "room": room, "max": 45})
	if f := mustReadOp(t, v, opDensity); f.Max != 30 || f.Room != room {
		t.Fatalf("density answer %+v, want the 30/s tier", f)
	}
	mustPush(t, p, s, feed.batch(1))
	a, b := mustReadOp(t, v, danmaku.OpMsgs), mustReadOp(t, ref, danmaku.OpMsgs)
	if !slices.Equal(msgIDs(a), msgIDs(b)) || len(a.Msgs) == 0 {
		t.Fatalf("after the op the viewer got %d messages, the 30/s tier %d", len(a.Msgs), len(b.Msgs))
	}
	mustSend(t, v, map[string]any{"op": "density", "max": 0})
	if f := mustReadOp(t, v, opDensity); f.Max != 0 {
		t.Fatalf("density answer %+v, want every message", f)
	}
	mustPush(t, p, s, feed.batch(2))
	if f := mustReadOp(t, v, danmaku.OpMsgs); len(f.Msgs) != 1000 || f.Skipped != 0 {
		t.Fatalf("after max 0: %d messages, %d skipped", len(f.Msgs), f.Skipped)
	}

	mustSend(t, v, map[string]any{"op": "density", "room": "elsewhere", "max": 10})
	if f := mustReadOp(t, v, opError); f.Code != codeNotSubbed {
		t.Fatalf("density op for another room: %+v", f)
	}
	mustSend(t, v, map[string]any{"op": "density", "room": room, "max": -1})
	if f := mustReadOp(t, v, opError); f.Code != codeBadJSON {
		t.Fatalf("negative max: %+v", f)
	}
	resp, err := http.Get("http://" + s.PublicAddr() + "/ws?room=" + room + "&density=lots")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("density=lots: status %d, want 400", resp.StatusCode)
	}
}

// A token's density claim caps a viewer that asks for nothing itself; the
// URL's density wins over it, and a claim out of range refuses the token.
func TestDensityTokenClaim(t *testing.T) {
	keys := tokens.New(t)
	s := startWithAuth(t, keys)
	room := testkit.Uniq("claim-")
	exp := time.Now().Add(time.Hour)
	ten, huge := 10, auth.MaxDensity+1
	tok, err := auth.Mint(keys.Secret, auth.Claims{UID: 42, ExpiresAt: exp, Density: &ten})
	if err != nil {
		t.Fatal(err)
	}
	if w := mustReadOp(t, mustDial(t, s, "room="+room+"&token="+tok), opWelcome); w.Density != 10 {
		t.Fatalf("with the token's claim: density %d, want 10", w.Density)
	}
	if w := mustReadOp(t, mustDial(t, s, "room="+room+"&density=30&token="+tok), opWelcome); w.Density != 30 {
		t.Fatalf("with the claim and density=30: density %d, want 30", w.Density)
	}
	if w := mustReadOp(t, mustDial(t, s, "room="+room+"&density=all&token="+tok), opWelcome); w.Density != 0 {
		t.Fatalf("with the claim and density=all: density %d, want every message", w.Density)
	}
	if _, err := auth.Mint(keys.Secret, auth.Claims{UID: 42, ExpiresAt: exp, Density: &huge}); danmaku.ErrorField(err) != "density" {
		t.Fatalf("minting a density out of range: %v", err)
	}
}
