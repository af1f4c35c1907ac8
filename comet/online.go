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
// over all comets read (one SCARD) and, when it changed since the last
// round, sent to its local viewers as one prepared frame. One hub shard is
// swept per tick, so the Redis calls spread over the period.
func (s *Server) onlineLoop() {
	defer s.bg.Done()
	if s.cfg.OnlinePeriod <= 0 {
		return
	}
	t := time.NewTicker(max(s.cfg.OnlinePeriod/numShards, time.Millisecond))
	defer t.Stop()
	var last [numShards]map[string]int64 // count last sent, per shard and room
	var rooms []string
	next := 0
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			rooms = s.hub.roomIDs(next, rooms[:0])
			last[next] = s.sendOnline(rooms, last[next])
			next = (next + 1) % numShards
		}
	}
}

// sendOnline sends the count of each room whose count differs from prev,
// and returns the counts now known (rooms gone since are forgotten).
func (s *Server) sendOnline(rooms []string, prev map[string]int64) map[string]int64 {
	if len(rooms) == 0 {
		return nil
	}
	now := make(map[string]int64, len(rooms))
	for _, id := range rooms {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
		n, err := s.rt.Online(ctx, id)
		cancel()
		if err != nil {
			if old, ok := prev[id]; ok {
				now[id] = old
			}
			continue
		}
		now[id] = n
		if old, ok := prev[id]; ok && old == n {
			continue
		}
		f := onlineFrame{Op: opOnline, Room: id, Online: n}
		_, slow := s.hub.deliver(id, item{pm: prepare(f), size: len(id) + 40, lossy: true}, nil)
		for _, c := range slow {
			c.slowConsumer()
		}
	}
	return now
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
