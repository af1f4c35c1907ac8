package job_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
)

// sendOne posts one comment of uid to room through the harness logic and
// returns the answer's status and body.
func (e *env) sendOne(room string, uid int64, content string) (int, danmaku.SendResponse) {
	e.t.Helper()
	body, _ := json.Marshal(danmaku.SendRequest{RoomID: room, UserID: uid, UserName: "tester",
		Messages: []danmaku.SendMessage{{Content: content}}})
	resp, err := http.Post(e.logic.URL+"/logic/send", "application/json", bytes.NewReader(body))
	if err != nil {
		e.t.Fatalf("send: %v", err)
	}
	defer resp.Body.Close()
	var out danmaku.SendResponse
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// review reads room's review queue from the harness logic.
func (e *env) review(room string) []danmaku.ReviewItem {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.logic.URL+"/logic/admin/review?roomId="+room, nil)
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out danmaku.ReviewResponse
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		e.t.Fatalf("review: status %d", resp.StatusCode)
	}
	return out.Items
}

// decide approves or rejects ids of room and returns the count answered.
func (e *env) decide(op, room string, ids ...string) int {
	e.t.Helper()
	var out danmaku.AdminResponse
	e.admin("/logic/admin/review/"+op, fmt.Sprintf(`{"roomId":%q,"ids":["%s"]}`, room, strings.Join(ids, `","`)), http.StatusOK, &out)
	n := out.Approved
	if op == "reject" {
		n = out.Rejected
	}
	if n == nil {
		e.t.Fatalf("%s: no count in %+v", op, out)
	}
	return *n
}

// In a room with review on, a comment with a blocked word is answered 202
// with its id in held, reaches nobody and waits in the room's queue (the
// words as written); approved, it reaches every viewer once, in order
// after what went out before, with its id; approved again, nothing more
// happens; a rejected one never appears. A room without review refuses
// the word.
func TestReviewQueue(t *testing.T) {
	e, room, viewers := newRoomOnTwoComets(t)
	e.startJob(jobConfig(), nil)
	if st, _ := e.sendOne(testkit.Uniq("room"), 5, "a "+blockedWord); st != http.StatusBadRequest {
		t.Fatalf("a blocked word without review: %d", st)
	}
	e.admin("/logic/admin/room", `{"roomId":"`+room+`","review":true}`, http.StatusOK, nil)
	first := e.send(room, 5, "hello")
	st, held := e.sendOne(room, 6, "a "+blockedWord+" here")
	if st != http.StatusAccepted || len(held.MsgIDs) != 1 || !slices.Equal(held.Held, held.MsgIDs) {
		t.Fatalf("held send: %d %+v", st, held)
	}
	_, rej := e.sendOne(room, 7, blockedWord+" again")
	after := e.send(room, 5, "after")
	items := e.review(room)
	if len(items) != 2 || items[0].ID != held.MsgIDs[0] || items[0].Word != blockedWord || items[0].Content != "a "+blockedWord+" here" ||
		items[0].UID != 6 || items[1].ID != rej.MsgIDs[0] {
		t.Fatalf("queue %+v", items)
	}
	want := []string{first[0], after[0]}
	waitShown(t, viewers, want)
	if n := e.decide("reject", room, rej.MsgIDs[0], "nosuch"); n != 1 {
		t.Fatalf("rejected %d, want 1", n)
	}
	if n := e.decide("approve", room, held.MsgIDs[0], rej.MsgIDs[0]); n != 1 {
		t.Fatalf("approved %d, want 1", n)
	}
	if n := e.decide("approve", room, held.MsgIDs[0]); n != 0 {
		t.Fatalf("approved again: %d, want 0", n)
	}
	want = append(want, held.MsgIDs[0])
	waitShown(t, viewers, want)
	time.Sleep(300 * time.Millisecond)
	for _, v := range viewers {
		e.checkTimeline(v, 0, want, v.messages()[0].Epoch, 1)
	}
	if m := viewers[0].messages()[2].Msg; m.UID != 6 || m.Content != "a "+blockedWord+" here" {
		t.Fatalf("approved message %+v", m)
	}
	if items := e.review(room); len(items) != 0 {
		t.Fatalf("queue after: %+v", items)
	}
}

// queueForReview turns review on in room and sends n comments with the
// blocked word, from users uid, uid+1, ...; it returns their ids, each
// held for review.
func (e *env) queueForReview(room string, n int, uid int64) []string {
	e.t.Helper()
	e.admin("/logic/admin/room", `{"roomId":"`+room+`","review":true}`, http.StatusOK, nil)
	var ids []string
	for i := range n {
		_, r := e.sendOne(room, uid+int64(i), fmt.Sprintf("%s %d", blockedWord, i))
		if len(r.Held) != 1 {
			e.t.Fatalf("send %d not held: %+v", i, r)
		}
		ids = append(ids, r.Held[0])
	}
	return ids
}

// waitShown waits until every viewer showed want, exactly, in order.
func waitShown(t *testing.T, viewers []*viewer, want []string) {
	t.Helper()
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		for _, v := range viewers {
			if got := v.shown(); !slices.Equal(got, want) {
				return fmt.Errorf("shown %v, want %v", got, want)
			}
		}
		return nil
	})
}

// Approved comments keep the timeline's guarantees through a job killed
// while it delivers them: the next member delivers every one once, in the
// order they were approved; the queue is in Redis, so it is the same for
// every logic.
func TestApprovedSurviveACrash(t *testing.T) {
	e, room, viewers := newRoomOnTwoComets(t)
	cfg := jobConfig()
	ids := e.queueForReview(room, 40, 10)
	a := e.startJob(cfg, nil)
	for i := 0; i < 20; i += 2 {
		if n := e.decide("approve", room, ids[i], ids[i+1]); n != 2 {
			t.Fatalf("approved %d, want 2", n)
		}
	}
	testkit.SucceedsSoon(t, 20*time.Second, func() error {
		if n := len(viewers[0].shown()); n < 4 {
			return fmt.Errorf("%d shown", n)
		}
		return nil
	})
	a.Crash()
	<-a.Done()
	e.startJob(cfg, nil)
	for i := 20; i < 40; i += 4 {
		if n := e.decide("approve", room, ids[i:i+4]...); n != 4 {
			t.Fatalf("approved %d, want 4", n)
		}
	}
	waitShown(t, viewers, ids)
	time.Sleep(300 * time.Millisecond)
	for _, v := range viewers {
		e.checkTimeline(v, 0, ids, v.messages()[0].Epoch, 1)
	}
}

// records counts the records of the topic that carry a message of id.
func (e *env) records(id string) int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	for p := range e.kafka.Partitions {
		conn, err := kafka.DialLeader(ctx, "tcp", e.kafka.Brokers[0], e.kafka.Topic, p)
		if err != nil {
			e.t.Fatal(err)
		}
		first, last, err := conn.ReadOffsets()
		if err == nil {
			_, err = conn.Seek(first, kafka.SeekAbsolute)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		for off := first; err == nil && off < last; off++ {
			var m kafka.Message
			if m, err = conn.ReadMessage(1 << 20); err == nil && bytes.Contains(m.Value, []byte(`"id":"`+id+`"`)) {
				n++
			}
		}
		conn.Close()
		if err != nil {
			e.t.Fatalf("read partition %d: %v", p, err)
		}
	}
	return n
}

// Two approvals of the same queued comment at the same instant write it
// to Kafka once: one answers approved 1, the other 0; every viewer shows
// it once.
func TestConcurrentApprovalsWriteOnce(t *testing.T) {
	e, room, viewers := newRoomOnTwoComets(t)
	e.startJob(jobConfig(), nil)
	ids := e.queueForReview(room, 10, 20)
	for _, id := range ids {
		var counts [2]int
		var wg sync.WaitGroup
		for k := range counts {
			wg.Go(func() { counts[k] = e.decide("approve", room, id) })
		}
		wg.Wait()
		if counts[0]+counts[1] != 1 {
			t.Fatalf("%s approved %v times", id, counts)
		}
	}
	waitShown(t, viewers, ids)
	for _, id := range ids {
		if n := e.records(id); n != 1 {
			t.Errorf("%s: %d records on the topic, want 1", id, n)
		}
	}
}

// A send retried without a msgId (same sender, same content) while its
// comment waits for review is answered with that comment's id and queued
// once; approved, it is shown once. The same content from another sender
// is a comment of its own.
func TestReviewRetryWithoutMsgID(t *testing.T) {
	e, room, viewers := newRoomOnTwoComets(t)
	e.startJob(jobConfig(), nil)
	e.admin("/logic/admin/room", `{"roomId":"`+room+`","review":true}`, http.StatusOK, nil)
	content := "a " + blockedWord + " retried"
	_, first := e.sendOne(room, 8, content)
	_, retry := e.sendOne(room, 8, content)
	_, other := e.sendOne(room, 9, content)
	if len(first.Held) != 1 || !slices.Equal(retry.Held, first.Held) || !slices.Equal(retry.MsgIDs, first.MsgIDs) {
		t.Fatalf("first %+v, retry %+v", first, retry)
	}
	if len(other.Held) != 1 || other.Held[0] == first.Held[0] {
		t.Fatalf("another sender's comment %+v", other)
	}
	if items := e.review(room); len(items) != 2 || items[0].ID != first.Held[0] || items[1].ID != other.Held[0] {
		t.Fatalf("queue %+v", items)
	}
	if n := e.decide("approve", room, first.Held[0]); n != 1 {
		t.Fatalf("approved %d", n)
	}
	waitShown(t, viewers, first.Held)
	time.Sleep(300 * time.Millisecond)
	waitShown(t, viewers, first.Held)
}
