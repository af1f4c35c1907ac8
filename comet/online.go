package comet

import (
	"context"
	"time"

	"github.com/danmaku/danmaku"
)

// opOnline is the frame carrying a room's viewer count:
// {"op":"online","room":"lobby","online":42}.
const opOnline = danmaku.OpOnline

// onlineLoop keeps viewers' online counts current without clients polling
// the API: once per OnlinePeriod each room with local viewers has its count
// over all comets read (one SCARD) and sent, as one prepared frame, to the
// local viewers that were not told that count yet (by their welcome or an
// earlier frame). One hub shard is swept per tick, so the Redis calls
// spread over the period.
func (s *Server) onlineLoop() {
	defer s.bg.Done()
	if s.cfg.OnlinePeriod <= 0 {
		return
	}
	t := time.NewTicker(max(s.cfg.OnlinePeriod/numShards, time.Millisecond))
	defer t.Stop()
	var rooms []string
	next := 0
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			rooms = s.hub.roomIDs(next, rooms[:0])
			s.sendOnline(rooms)
			next = (next + 1) % numShards
		}
	}
}

// sendOnline reads the count of each of rooms and announces it.
func (s *Server) sendOnline(rooms []string) {
	for _, id := range rooms {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
		n, err := s.rt.Online(ctx, id)
		cancel()
		if err != nil {
			continue
		}
		s.cut(s.hub.announceOnline(id, n))
	}
}

// announceOnline sends the count n of room id to its local viewers that
// were told another one, and returns the viewers to cut.
func (h *hub) announceOnline(id string, n int64) (slow []*conn) {
	r := h.room(id)
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var it item
	for _, m := range r.members {
		if m.online == n {
			continue
		}
		if it.PM == nil {
			it = item{PM: prepare(onlineFrame{Op: opOnline, Room: id, Online: n}), Size: len(id) + 40, Lossy: true}
		}
		m.online = n
		if m.c.enqueue(it) == queueFull {
			slow = append(slow, m.c)
		}
	}
	return slow
}

// roomIDs appends the ids of the rooms of shard i with local viewers to
// buf.
func (h *hub) roomIDs(i int, buf []string) []string {
	for _, r := range h.rooms(i, nil) {
		r.mu.Lock()
		if len(r.members) > 0 {
			buf = append(buf, r.id)
		}
		r.mu.Unlock()
	}
	return buf
}
