package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/stack"
	"github.com/danmaku/danmaku/internal/testkit/wsviewer"
)

// Redis killed (SIGKILL) and started empty on the same port while viewers
// are connected and messages flow: the comets register their viewers
// again at the next lease renewal, so every viewer, never disconnected,
// shows every message accepted after Redis is back within lease_renew +
// window (and job's comet refresh) of Redis being back or of its sending,
// /logic/online counts them again and the comets count the repair. The gap
// check is off: it would fill what job delivered to nobody from the room's
// history and hide a registry that never heals.
func TestFaultRedisRestartedEmpty(t *testing.T) {
	s := stack.New(t, stack.Options{Comet: []string{"-comet.gap_check", "0"}})
	room := testkit.Uniq("restarted-")
	var vs []*wsviewer.Viewer
	for i := 0; i < 10; i++ {
		vs = append(vs, s.Viewer(t, room, s.Comets[i%2]))
	}
	send := s.Send(t, room, 1500, 250)
	testkit.SucceedsSoon(t, 10*time.Second, func() error { return firstShown(vs[0], 200) })
	if err := s.Redis.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	send.Wait(t, 30*time.Second)
	sent := send.SentAfter(back)
	if len(sent) < 500 {
		t.Fatalf("only %d messages accepted after Redis came back", len(sent))
	}
	var ids []string
	for _, m := range sent {
		ids = append(ids, m.ID)
	}
	wsviewer.Delivered(t, 10*time.Second, ids, vs...)
	repaired := back.Add(stack.LeaseRenew + stack.Window + jobRefresh)
	shownSoon(t, sent, repaired, time.Second, vs...)
	onlineIs(t, s, room, int64(len(vs)), 5*time.Second)
	for i, v := range vs {
		if n := v.Conns(); n != 1 {
			t.Errorf("viewer %d connected %d times; a Redis restart must not cut viewers", i, n)
		}
	}
	for _, c := range s.Comets {
		testkit.SucceedsSoon(t, 5*time.Second, func() error {
			return registryRepaired(c, "reregister", len(vs)/len(s.Comets))
		})
	}
	nobody, _ := stack.Metric(s.Jobs[0].Metrics, `danmaku_job_undelivered_total{reason="no_comets"}`)
	t.Logf("job: %v messages delivered to no comet while the routes were gone", nobody)
}

// jobRefresh is the stack's job.comet_refresh: how long job may take to
// read the leases the comets wrote again.
const jobRefresh = 200 * time.Millisecond

// shownSoon checks that every viewer showed every message of sent within
// slack of its sending, or of from for a message sent before from.
func shownSoon(t *testing.T, sent []stack.Sent, from time.Time, slack time.Duration, vs ...*wsviewer.Viewer) {
	t.Helper()
	var worst time.Duration
	late := 0
	for i, v := range vs {
		at := map[string]time.Time{}
		for _, m := range v.Shown() {
			at[m.ID] = m.At
		}
		for _, m := range sent {
			shown, ok := at[m.ID]
			if !ok {
				continue // Delivered reports it
			}
			d := shown.Sub(m.At)
			if m.At.Before(from) {
				d = shown.Sub(from)
			}
			worst = max(worst, d)
			if d > slack {
				if late == 0 {
					t.Errorf("viewer %d showed %s %v after it was sent (%v after Redis was back and the routes could be repaired), want within %v",
						i, m.ID, shown.Sub(m.At).Round(time.Millisecond), d.Round(time.Millisecond), slack)
				}
				late++
			}
		}
	}
	if late > 0 {
		t.Errorf("%d deliveries late", late)
	}
	t.Logf("latest delivery %v after its sending or the repair", worst.Round(time.Millisecond))
}

// registryRepaired reports an error until comet c counted a repair of kind
// and at least added routes written.
func registryRepaired(c *stack.Comet, kind string, added int) error {
	n, err := stack.Metric(c.Internal, `danmaku_comet_registry_repairs_total{kind="`+kind+`"}`)
	if err != nil {
		return err
	}
	a, err := stack.Metric(c.Internal, `danmaku_comet_registry_repaired_total{change="added"}`)
	if err != nil {
		return err
	}
	held, _ := stack.Metric(c.Internal, "danmaku_comet_registry_held_connections")
	reg, _ := stack.Metric(c.Internal, "danmaku_comet_registry_registered_connections")
	if n < 1 || a < float64(added) || held != reg {
		return fmt.Errorf("comet %s: %v repairs of kind %s, %v routes added (want %d), %v held and %v registered",
			c.ID, n, kind, a, added, held, reg)
	}
	return nil
}

// The phantom viewer: while Redis is paused, viewers join (their
// registration times out and they are refused) and leave (the unregister
// times out as well); the late registrations land when Redis answers
// again. Within reconcile_interval (500 ms here) the room counts only the
// viewer really connected.
func TestFaultPhantomViewer(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 1})
	room := testkit.Uniq("phantom-")
	present := s.Viewer(t, room, s.Comets[0])
	onlineIs(t, s, room, 1, 5*time.Second)
	resume := s.Redis.PauseUntilResumed(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			joinAndLeave(s.Comets[0].WS() + "?room=" + room)
		}()
	}
	wg.Wait()
	// Redis stays paused until the unregisters of the refused viewers gave
	// up too (comet.redis_timeout is 500 ms): their registrations, already
	// written to Redis's socket, run when it answers, the unregisters never.
	time.Sleep(time.Second)
	resume()
	// A viewer that joins and leaves once Redis answers: the registry works
	// again, and whatever was queued in Redis has run.
	s.Viewer(t, room, s.Comets[0]).Close()
	start := time.Now()
	onlineIs(t, s, room, 1, stack.ReconcileInterval+3*time.Second)
	t.Logf("online right after %v", time.Since(start).Round(time.Millisecond))
	time.Sleep(2 * stack.ReconcileInterval) // it stays right
	onlineIs(t, s, room, 1, 0)
	present.Close()
	onlineIs(t, s, room, 0, stack.ReconcileInterval+3*time.Second)
	removed, _ := stack.Metric(s.Comets[0].Internal, `danmaku_comet_registry_repaired_total{change="removed"}`)
	t.Logf("phantom routes removed by the comet: %v", removed)
}

// joinAndLeave opens /ws at u, reads until the comet answers or 3 s pass,
// and closes the connection.
func joinAndLeave(u string) {
	ws, _, err := wsviewer.TryDial(u, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	ws.NextRaw(3 * time.Second)
}

// onlineIs waits up to d until /logic/online of room says want.
func onlineIs(t *testing.T, s *stack.Stack, room string, want int64, d time.Duration) {
	t.Helper()
	testkit.SucceedsSoon(t, d, func() error {
		n, err := s.Online(room)
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("/logic/online of %s: %d, want %d", room, n, want)
		}
		return nil
	})
}

// A comet killed (SIGKILL) and restarted with the same comet.id before its
// lease expired: the restarted comet removes the routes its previous life
// left before it serves, so no key names a connection nobody holds and the
// counts are right. Lease renewals and reconciles are rare here, so only
// the removal at start can clean up within the test.
func TestFaultCometRestartedSameID(t *testing.T) {
	s := stack.New(t, stack.Options{Comet: []string{"-comet.lease_ttl", "20s",
		"-comet.lease_renew", "10s", "-comet.reconcile_interval", "60s"}})
	room := testkit.Uniq("sameid-")
	var moved, stayed, fresh []*wsviewer.Viewer
	for i := 0; i < 20; i++ {
		moved = append(moved, s.Viewer(t, room, s.Comets[0], s.Comets[1]))
	}
	for i := 0; i < 5; i++ {
		stayed = append(stayed, s.Viewer(t, room, s.Comets[1]))
	}
	onlineIs(t, s, room, 25, 5*time.Second)
	s.Comets[0].Kill()
	for _, v := range moved {
		v.WaitWelcomes(t, 2, 15*time.Second) // on the other comet
	}
	s.RestartComet(t, 0)
	c0 := s.Comets[0]
	// Serving: the leftovers are gone already.
	if err := sameIDRoutes(s, room, c0.ID, 25, 0); err != nil {
		t.Errorf("once the restarted comet serves: %v", err)
	}
	if n, err := stack.Metric(c0.Internal, `danmaku_comet_registry_repairs_total{kind="leftover"}`); n != 1 {
		t.Errorf("leftover removals counted: %v (%v), want 1", n, err)
	}
	for i := 0; i < 3; i++ {
		fresh = append(fresh, s.Viewer(t, room, c0))
	}
	want := len(moved) + len(stayed) + len(fresh)
	testkit.SucceedsSoon(t, 5*time.Second, func() error { return sameIDRoutes(s, room, c0.ID, want, len(fresh)) })
}

// sameIDRoutes reports an error unless room counts online viewers, Redis
// holds that many connection:info keys, and comet lists mine connections
// and counts mine in room.
func sameIDRoutes(s *stack.Stack, room, comet string, online, mine int) error {
	ctx := context.Background()
	n, err := s.Online(room)
	if err != nil {
		return err
	}
	infos, err := s.Keys("connection:info:*")
	if err != nil {
		return err
	}
	held, err := s.RDB().HLen(ctx, "comet:connections:{"+comet+"}").Result()
	if err != nil {
		return err
	}
	count, _ := s.RDB().HGet(ctx, "room:comets:{"+room+"}", comet).Int64()
	if n != int64(online) || len(infos) != online || held != int64(mine) || count != int64(mine) {
		return fmt.Errorf("online %d, connection:info keys %d (want %d); comet %s: %d connections listed, room count %d (want %d)",
			n, len(infos), online, comet, held, count, mine)
	}
	return nil
}

// A 5 s Redis pause: once Redis answers again, every room broadcasts
// within 1 s; no lock taken by a round trip job gave up on holds a room
// back.
func TestFaultRedisPause(t *testing.T) {
	s := stack.New(t, stack.Options{})
	const rooms = 6
	var vs []*wsviewer.Viewer
	var sends []*stack.Sender
	for i := 0; i < rooms; i++ {
		room := testkit.Uniq(fmt.Sprintf("pause%d-", i))
		vs = append(vs, s.Viewer(t, room, s.Comets[i%2]))
		sends = append(sends, s.Send(t, room, 100000, 40))
	}
	testkit.SucceedsSoon(t, 10*time.Second, func() error { return firstShown(vs[rooms-1], 20) })
	resume := s.Redis.PauseUntilResumed(t)
	time.Sleep(5 * time.Second) // the pause
	resume()
	back := time.Now()
	var report []string
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		report = report[:0]
		for i, v := range vs {
			ids := sends[i].AcceptedAfter(back)
			if len(ids) == 0 {
				return fmt.Errorf("room %d: nothing accepted since Redis answers", i)
			}
			at, ok := shownAt(v, ids[0])
			if !ok {
				return fmt.Errorf("room %d: first message accepted after Redis answers not shown yet", i)
			}
			report = append(report, fmt.Sprintf("room %d: %v", i, at.Sub(back).Round(time.Millisecond)))
		}
		return nil
	})
	for _, sd := range sends {
		sd.Stop()
	}
	t.Logf("first broadcast after Redis answered: %s", strings.Join(report, ", "))
	for i, v := range vs {
		at, _ := shownAt(v, sends[i].AcceptedAfter(back)[0])
		if d := at.Sub(back); d > time.Second {
			t.Errorf("room %d broadcast again %v after Redis answered, want within 1 s", i, d.Round(time.Millisecond))
		}
	}
}

// shownAt returns when v showed id.
func shownAt(v *wsviewer.Viewer, id string) (time.Time, bool) {
	for _, m := range v.Shown() {
		if m.ID == id {
			return m.At, true
		}
	}
	return time.Time{}, false
}

// A job whose push secret differs from the comets': its log says, at
// error level, that the comet answered 401 and names the secret.
func TestFaultPushSecretMismatch(t *testing.T) {
	s := stack.New(t, stack.Options{Comets: 1, NoWarmUp: true,
		Job: []string{"-job.push_secret", "not-the-comet-secret"}})
	room := testkit.Uniq("secret-")
	s.Viewer(t, room, s.Comets[0])
	send := s.Send(t, room, 20, 20)
	send.Wait(t, 10*time.Second)
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		for _, l := range s.Jobs[0].LogLines() {
			line := fmt.Sprint(l)
			if l["level"] == "error" && strings.Contains(line, "401") && strings.Contains(strings.ToLower(line), "secret") {
				return nil
			}
		}
		return fmt.Errorf("no error line of job names 401 and the secret (job log below)")
	})
}
