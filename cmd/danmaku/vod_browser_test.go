package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
)

// TestBrowserReplay: a stream started 42 s ago gets a comment sent live
// now (so at 00:42 of the stream) and one that a moderator deletes. The
// replay page, its clock driven by the test, shows the first comment when
// the playhead passes its offset and not before, and never the deleted
// one; the density curve is drawn from the stream's counts.
func TestBrowserReplay(t *testing.T) {
	m := startMain(t, func(c *Config) { c.Logic.AdminSecret = vodAdminSecret })
	room := testkit.Uniq("replay")
	stream := "talk-42"
	startEvent(t, m, danmaku.Event{Op: danmaku.OpStreamStart, Room: room, ID: testkit.Uniq("ev"), Stream: stream,
		At: time.Now().Add(-42 * time.Second).UnixMilli()})
	ids := send(t, m, room, "hello at forty-two", "this one goes")
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if code, _ := admin(t, m, "/logic/admin/delete", fmt.Sprintf(`{"roomId":%q,"ids":[%q]}`, room, ids[1])); code != http.StatusOK {
			return fmt.Errorf("delete: %d", code)
		}
		return nil
	})
	if code, _ := admin(t, m, "/logic/admin/stream/end", fmt.Sprintf(`{"roomId":%q}`, room)); code != http.StatusOK {
		t.Fatalf("stream/end: %d", code)
	}
	var seg danmaku.VODSegmentResponse
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		if _, err := getJSON(fmt.Sprintf("http://%s/logic/vod/segment?roomId=%s&streamId=%s&seg=0", m.Addr(), room, stream), &seg); err != nil {
			return err
		}
		if !seg.Final || len(seg.Comments) != 1 {
			return fmt.Errorf("segment %+v", seg)
		}
		return nil
	})
	at := seg.Comments[0].Offset
	if at < 42000 || at > 45000 {
		t.Fatalf("the comment is at %d ms of the stream, want 00:42", at)
	}

	tab := newBrowser(t)
	eval := func(js string) {
		t.Helper()
		if err := chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](js, chromedp.EvalAwaitPromise)); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
	}
	shown := func() []string {
		ids, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`DanmakuVOD.player.shown`))
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	onStage := func(id string) int {
		n, err := chromedp.Run(tab, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('#vod-layer [data-id=%q]').length`, id)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	url := fmt.Sprintf("http://%s/vod.html?room=%s&stream=%s&clock=manual", m.Addr(), room, stream)
	if err := chromedp.Do(tab, chromedp.Navigate(url),
		chromedp.Poll[chromedp.Void](`window.DanmakuVOD && DanmakuVOD.player && DanmakuVOD.player.curve`, chromedp.WithPollingTimeout(10*time.Second)),
	); err != nil {
		t.Fatal(err)
	}
	eval(`DanmakuVOD.player.seek(30000)`)
	eval(fmt.Sprintf(`DanmakuVOD.player.advance(%d)`, at-30000-300))
	if got := shown(); len(got) != 0 || onStage(ids[0]) != 0 {
		t.Fatalf("at %d ms the page already showed %v", at-300, got)
	}
	eval(`DanmakuVOD.player.advance(600)`)
	if got := shown(); len(got) != 1 || got[0] != ids[0] || onStage(ids[0]) != 1 {
		t.Fatalf("at %d ms the page showed %v, want %s flying", at+300, got, ids[0])
	}
	// Play the rest, seek back to the start and play it all again: the
	// deleted comment never shows; the other shows once per pass.
	eval(`DanmakuVOD.player.advance(600000)`)
	eval(`DanmakuVOD.player.seek(0)`)
	eval(`DanmakuVOD.player.advance(600000)`)
	if got := shown(); len(got) != 2 || got[0] != ids[0] || got[1] != ids[0] {
		t.Fatalf("after two passes the page showed %v, want %s twice and never %s", got, ids[0], ids[1])
	}
	curve, err := chromedp.Run(tab, chromedp.Evaluate[[]int64](`DanmakuVOD.player.curve`))
	if err != nil || len(curve) != int(at/10000)+1 || curve[len(curve)-1] != 1 {
		t.Errorf("density curve %v, %v", curve, err)
	}
}

// startEvent writes ev to the room topic as logic would.
func startEvent(t *testing.T, m *Main, ev danmaku.Event) {
	t.Helper()
	v, err := danmaku.MarshalEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(m.Config.Kafka.Brokers...), Topic: m.Config.Kafka.Topic, Balancer: &kafka.Hash{},
		BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(ev.Room), Value: v}); err != nil {
		t.Fatal(err)
	}
}
