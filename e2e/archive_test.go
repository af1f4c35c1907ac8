package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
	"github.com/danmaku/danmaku/internal/testkit/pgserver"
	"github.com/danmaku/danmaku/internal/testkit/redisserver"
	"github.com/danmaku/danmaku/internal/testkit/stack"
)

const archiveAdminSecret = "archive-e2e-admin-secret"

// archiveStack is the logic and archive binaries on a real redis-server,
// the embedded Kafka broker and a PostgreSQL of the test's own.
type archiveStack struct {
	logicURL, arcMetrics string
	arc                  *proc
	pg                   *pgserver.Server
}

func newArchiveStack(t *testing.T) *archiveStack {
	redis := redisserver.Standalone(t)
	broker := kafkabroker.Start(t, kafkabroker.MinSessionTimeout(time.Second))
	pg := pgserver.Start(t)
	dsn := pg.DSN(t, "archive")
	logicAddr, arcAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	kafka := strings.Join(broker.Brokers(), ",")
	start(t, "logic", "-config", "configs/logic.yaml", "-redis.addrs", redis.Addr, "-kafka.brokers", kafka,
		"-logic.listen", logicAddr, "-logic.admin_secret", archiveAdminSecret, "-logic.archive_dsn", dsn,
		"-logic.rate_limit", "100000", "-logic.rate_burst", "100000", "-logic.ip_rate_limit", "0")
	arc := start(t, "archive", "-config", "configs/archive.yaml", "-kafka.brokers", kafka, "-archive.dsn", dsn,
		"-archive.metrics_addr", arcAddr, "-archive.session_timeout", "1s", "-archive.heartbeat_interval", "200ms",
		"-archive.rebalance_timeout", "2s", "-archive.batch_wait", "20ms", "-archive.write_timeout", "2s")
	a := &archiveStack{logicURL: "http://" + logicAddr, arcMetrics: "http://" + arcAddr + "/metrics", arc: arc, pg: pg}
	a.waitReady(t)
	return a
}

// waitReady waits until the archive consumes.
func (a *archiveStack) waitReady(t *testing.T) {
	t.Helper()
	ready := strings.Replace(a.arcMetrics, "/metrics", "/readyz", 1)
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if code := status(ready); code != http.StatusOK {
			return fmt.Errorf("archive /readyz %d", code)
		}
		return nil
	})
}

// startStream starts a stream of room and returns its id.
func (a *archiveStack) startStream(t *testing.T, room string) string {
	t.Helper()
	return a.admin(t, "/logic/admin/stream/start", fmt.Sprintf(`{"roomId":%q}`, room)).StreamID
}

// admin runs an admin action that must succeed.
func (a *archiveStack) admin(t *testing.T, path, body string) danmaku.AdminResponse {
	t.Helper()
	code, resp := adminPost(t, a.logicURL, path, body)
	if code != http.StatusOK {
		t.Fatalf("%s %s: %d", path, body, code)
	}
	return resp
}

// endedSegment ends the room's stream and returns its first segment once
// it is final: every record before the end was archived.
func (a *archiveStack) endedSegment(t *testing.T, room, stream string) danmaku.VODSegmentResponse {
	t.Helper()
	if code, _ := adminPost(t, a.logicURL, "/logic/admin/stream/end", fmt.Sprintf(`{"roomId":%q}`, room)); code != http.StatusOK {
		t.Fatalf("stream/end: %d", code)
	}
	var seg danmaku.VODSegmentResponse
	testkit.SucceedsSoon(t, 60*time.Second, func() error {
		resp, err := http.Get(fmt.Sprintf("%s/logic/vod/segment?roomId=%s&streamId=%s&seg=0", a.logicURL, room, stream))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		seg = danmaku.VODSegmentResponse{}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &seg) != nil {
			return fmt.Errorf("segment: %d %s", resp.StatusCode, b)
		}
		if !seg.Final {
			return fmt.Errorf("stream not ended yet (%d comments so far)", len(seg.Comments))
		}
		return nil
	})
	return seg
}

// segIDs returns the ids of the segment's comments, in order.
func segIDs(seg danmaku.VODSegmentResponse) []string {
	out := []string{}
	for _, c := range seg.Comments {
		out = append(out, c.ID)
	}
	return out
}

// sendUnkeyed sends one comment without a msgId, so that its id is one
// logic generated: a moderator may delete it before job put it in the
// room's history (this stack has no job).
func sendUnkeyed(logicURL, room string, uid int64, content string) ([]string, error) {
	b, _ := json.Marshal(danmaku.SendRequest{RoomID: room, UserID: uid, UserName: "viewer", Messages: []danmaku.SendMessage{{Content: content}}})
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Post(logicURL+"/logic/send", "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out danmaku.SendResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusAccepted || len(out.MsgIDs) != 1 {
		return nil, fmt.Errorf("send: %d %v", resp.StatusCode, err)
	}
	return out.MsgIDs, nil
}

func adminPost(t *testing.T, base, path, body string) (int, danmaku.AdminResponse) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+archiveAdminSecret)
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out danmaku.AdminResponse
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestArchiveExactAcrossFaults: a stream's comments are sent through the
// logic binary while the archive binary is killed with SIGKILL and
// restarted, and while its PostgreSQL is shut down and started again;
// moderators delete some comments meanwhile. Once the stream ended, its
// replay (GET /logic/vod/segment on logic) holds exactly the accepted
// comments that were not deleted: none missing, none extra, none twice,
// no deleted one.
func TestArchiveExactAcrossFaults(t *testing.T) {
	a := newArchiveStack(t)
	logicURL, arc, pg := a.logicURL, a.arc, a.pg

	room := testkit.Uniq("vod")
	stream := a.startStream(t, room)
	var (
		mu       sync.Mutex
		accepted []string
		deleted  []string
	)
	stopSend := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 0; ; i++ {
			select {
			case <-stopSend:
				return
			case <-time.After(10 * time.Millisecond):
			}
			ids, err := sendUnkeyed(logicURL, room, int64(1+i%50), fmt.Sprint("comment ", i))
			if err != nil {
				continue // not accepted: not expected in the replay either
			}
			mu.Lock()
			accepted = append(accepted, ids...)
			mu.Unlock()
		}
	}()
	deleteSome := func() {
		mu.Lock()
		var pick []string
		for i := len(accepted) - 1; i >= 0 && len(pick) < 3; i -= 7 {
			if !slices.Contains(deleted, accepted[i]) {
				pick = append(pick, accepted[i])
			}
		}
		mu.Unlock()
		if len(pick) == 0 {
			return
		}
		b, _ := json.Marshal(map[string]any{"roomId": room, "ids": pick})
		if code, resp := adminPost(t, logicURL, "/logic/admin/delete", string(b)); code == http.StatusOK {
			mu.Lock()
			deleted = append(deleted, resp.IDs...)
			mu.Unlock()
		}
	}
	step := func(d time.Duration) {
		time.Sleep(d)
		deleteSome()
	}

	step(time.Second)
	arc.Kill() // a crash between writes and commits
	step(time.Second)
	arc.Restart(t)
	step(2 * time.Second)
	pg.Stop() // the database goes away mid-stream...
	step(2 * time.Second)
	if err := pg.Start(); err != nil { // ...and comes back
		t.Fatal(err)
	}
	step(2 * time.Second)
	pg.Kill() // a crash of the database this time
	step(time.Second)
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	step(time.Second)
	close(stopSend)
	<-sent
	deleteSome()
	seg := a.endedSegment(t, room, stream)

	mu.Lock()
	want := map[string]bool{}
	for _, id := range accepted {
		want[id] = true
	}
	for _, id := range deleted {
		delete(want, id)
	}
	mu.Unlock()
	t.Logf("%d comments accepted, %d deleted", len(accepted), len(deleted))
	if len(accepted) < 300 || len(deleted) < 5 {
		t.Fatalf("too few to tell: %d accepted, %d deleted", len(accepted), len(deleted))
	}
	got := map[string]int{}
	for _, c := range seg.Comments {
		got[c.ID]++
	}
	var missing, extra, twice, deletedShown []string
	for id := range want {
		if got[id] == 0 {
			missing = append(missing, id)
		}
	}
	for id, n := range got {
		if n > 1 {
			twice = append(twice, id)
		}
		if !want[id] {
			if slices.Contains(deleted, id) {
				deletedShown = append(deletedShown, id)
			} else {
				extra = append(extra, id)
			}
		}
	}
	t.Logf("replay: %d comments; missing %d, extra %d, twice %d, deleted shown %d", len(seg.Comments),
		len(missing), len(extra), len(twice), len(deletedShown))
	if len(missing)+len(extra)+len(twice)+len(deletedShown) != 0 || seg.Omitted != 0 {
		t.Fatalf("missing %v\nextra %v\ntwice %v\ndeleted shown %v\nomitted %d", missing, extra, twice, deletedShown, seg.Omitted)
	}
}

// A client's resend of a comment (the same msgId, accepted again with a
// later time) that comes after the archive was killed with SIGKILL and
// restarted is not stored a second time: what the database holds judges,
// not what the dead process remembered.
func TestArchiveRetryAcrossKill(t *testing.T) {
	a := newArchiveStack(t)
	room := testkit.Uniq("vod")
	stream := a.startStream(t, room)
	send := func(key, content string) string {
		b := postJSON(t, a.logicURL+"/logic/send", fmt.Sprintf(`{"roomId":%q,"userId":7,"userName":"ann","messages":[{"content":%q,"msgId":%q}]}`, room, content, key))
		var r struct{ MsgIDs []string }
		if err := json.Unmarshal(b, &r); err != nil || len(r.MsgIDs) != 1 {
			t.Fatalf("send answer %s", b)
		}
		return r.MsgIDs[0]
	}
	first := send("k1", "hello")
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if n := scrape(a.arcMetrics, "danmaku_archive_stored_total"); n != 1 {
			return fmt.Errorf("stored %v, want 1", n)
		}
		return nil
	})
	a.arc.Kill()
	a.arc.Restart(t)
	a.waitReady(t)
	time.Sleep(5 * time.Millisecond) // the resend gets a later time, so another offset
	if again := send("k1", "hello"); again != first {
		t.Fatalf("the resend got id %s, want %s", again, first)
	}
	after := send("k2", "after the resend")
	seg := a.endedSegment(t, room, stream)
	if got, want := segIDs(seg), []string{first, after}; !slices.Equal(got, want) {
		t.Fatalf("replay %v, want %v: the resend is stored once", got, want)
	}
}

// A hidden user's comments (shadow hide) travel as shadow events: the
// archive never serves them, neither in segments nor in the density
// curve, while the room's other comments are replayed.
func TestArchiveShadowNeverServed(t *testing.T) {
	a := newArchiveStack(t)
	room := testkit.Uniq("vod")
	stream := a.startStream(t, room)
	const hidden, other = 777001, 777002
	a.admin(t, "/logic/admin/hide", fmt.Sprintf(`{"userId":%d,"roomId":%q,"duration":"1h"}`, hidden, room))
	var secret, visible []string
	for i := range 3 {
		ids, err := stack.Post(a.logicURL, room, hidden, "spammer", []string{fmt.Sprint("buy followers ", i)})
		if err != nil {
			t.Fatal(err)
		}
		secret = append(secret, ids...)
		ids, err = stack.Post(a.logicURL, room, other, "fan", []string{fmt.Sprint("nice stream ", i)})
		if err != nil {
			t.Fatal(err)
		}
		visible = append(visible, ids...)
	}
	seg := a.endedSegment(t, room, stream)
	if got := segIDs(seg); !slices.Equal(got, visible) {
		t.Fatalf("replay %v, want only %v (hidden: %v)", got, visible, secret)
	}
	var d danmaku.VODDensityResponse
	if err := json.Unmarshal(getOK(t, fmt.Sprintf("%s/logic/vod/density?roomId=%s&streamId=%s&bucket=1h", a.logicURL, room, stream)), &d); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Counts, []int64{int64(len(visible))}) {
		t.Errorf("density %v, want [%d]", d.Counts, len(visible))
	}
}

// In a room with a delay, a comment is replayed where viewers saw it (its
// accepted time plus the delay), and one deleted while it was held, never
// shown live, is never replayed.
func TestArchiveDelayedComments(t *testing.T) {
	a := newArchiveStack(t)
	room := testkit.Uniq("vod")
	started := a.admin(t, "/logic/admin/stream/start", fmt.Sprintf(`{"roomId":%q}`, room))
	a.admin(t, "/logic/admin/room", fmt.Sprintf(`{"roomId":%q,"delaySeconds":3}`, room))
	before := time.Now().UnixMilli()
	shown, err := stack.Post(a.logicURL, room, 7, "ann", []string{"held, then shown"})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()
	gone, err := stack.Post(a.logicURL, room, 8, "bob", []string{"held, then deleted"})
	if err != nil {
		t.Fatal(err)
	}
	a.admin(t, "/logic/admin/delete", fmt.Sprintf(`{"roomId":%q,"ids":[%q]}`, room, gone[0]))
	seg := a.endedSegment(t, room, started.StreamID)
	if got := segIDs(seg); !slices.Equal(got, shown) {
		t.Fatalf("replay %v, want %v (the deleted held comment %s never)", got, shown, gone[0])
	}
	lo, hi := before-started.At+3000, after-started.At+3000
	if off := seg.Comments[0].Offset; off < lo || off > hi {
		t.Errorf("offset %d, want where it was shown: [%d, %d] (accepted time plus the 3 s delay)", off, lo, hi)
	}
}

// A comment held for review is not in the replay while it waits, and
// comes in once approved, once, with its original id at its original
// offset (before a comment sent after it); a rejected one never does.
func TestArchiveReview(t *testing.T) {
	a := newArchiveStack(t)
	room := testkit.Uniq("vod")
	stream := a.startStream(t, room)
	a.admin(t, "/logic/admin/words/add", fmt.Sprintf(`{"roomId":%q,"words":["leak"],"mode":"review"}`, room))
	held := func(content string) string {
		var r danmaku.SendResponse
		b := postJSON(t, a.logicURL+"/logic/send", fmt.Sprintf(`{"roomId":%q,"userId":7,"userName":"ann","messages":[{"content":%q}]}`, room, content))
		if err := json.Unmarshal(b, &r); err != nil || len(r.Held) != 1 || r.Held[0] != r.MsgIDs[0] {
			t.Fatalf("send %q: %s, want it held", content, b)
		}
		return r.Held[0]
	}
	var approved string
	testkit.SucceedsSoon(t, 10*time.Second, func() error { // the room's words reach the send path within a second
		b := postJSON(t, a.logicURL+"/logic/send", fmt.Sprintf(`{"roomId":%q,"userId":7,"userName":"ann","messages":[{"content":"a leak"}]}`, room))
		var r danmaku.SendResponse
		if json.Unmarshal(b, &r) != nil || len(r.Held) != 1 {
			a.admin(t, "/logic/admin/delete", fmt.Sprintf(`{"roomId":%q,"ids":[%q]}`, room, r.MsgIDs[0]))
			return fmt.Errorf("not held yet: %s", b)
		}
		approved = r.Held[0]
		return nil
	})
	rejected := held("another leak")
	before, err := sendUnkeyed(a.logicURL, room, 8, "sent while they wait")
	if err != nil {
		t.Fatal(err)
	}
	// Once the comment sent after them is in the replay, they are not.
	testkit.SucceedsSoon(t, 30*time.Second, func() error {
		seg := a.segment(t, room, stream)
		if !slices.Contains(segIDs(seg), before[0]) {
			return fmt.Errorf("replay %v, waiting for %s", segIDs(seg), before[0])
		}
		if slices.Contains(segIDs(seg), approved) || slices.Contains(segIDs(seg), rejected) {
			t.Fatalf("replay %v holds a comment waiting for review (%s, %s)", segIDs(seg), approved, rejected)
		}
		return nil
	})
	for range 2 { // approved twice: written once
		a.admin(t, "/logic/admin/review/approve", fmt.Sprintf(`{"roomId":%q,"ids":[%q]}`, room, approved))
	}
	a.admin(t, "/logic/admin/review/reject", fmt.Sprintf(`{"roomId":%q,"ids":[%q]}`, room, rejected))
	after, err := sendUnkeyed(a.logicURL, room, 8, "sent after the approval")
	if err != nil {
		t.Fatal(err)
	}
	seg := a.endedSegment(t, room, stream)
	if got, want := segIDs(seg), []string{approved, before[0], after[0]}; !slices.Equal(got, want) {
		t.Fatalf("replay %v, want %v: the approved comment once, at its original offset; the rejected %s never", got, want, rejected)
	}
}

// segment returns the room's first segment of stream as it is now.
func (a *archiveStack) segment(t *testing.T, room, stream string) danmaku.VODSegmentResponse {
	t.Helper()
	var seg danmaku.VODSegmentResponse
	if err := json.Unmarshal(getOK(t, fmt.Sprintf("%s/logic/vod/segment?roomId=%s&streamId=%s&seg=0", a.logicURL, room, stream)), &seg); err != nil {
		t.Fatal(err)
	}
	return seg
}
