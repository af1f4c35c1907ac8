package comet

import (
	"sync"
	"time"

	"github.com/danmaku/danmaku/comet/internal/timeline"
)

// numShards is the number of hub shards. A power of two; 64 keeps lock
// contention low on a few cores without making a broadcast sweep expensive.
const numShards = 64

// hub holds the rooms and connections of this comet in memory.
//
// Lock order: room.sync, then shard.mu, then room.mu, then the writer's
// lock of a conn. A conn's own lock (conn.mu, its list of rooms) is taken
// with no other lock held and none is taken under it. No code holds two
// shard locks or two room locks at once, and nothing blocks on the network
// while holding shard.mu or room.mu:
// enqueueing is a non-blocking append, socket writes happen in the
// connection's writer, Redis reads hold only room.sync.
//
// Ownership: the fields are set by newHub and never change; shards, users
// and notices lock for themselves, so any goroutine (HTTP handlers,
// readers, pushers, the loops) uses them.
type hub struct {
	shards   [numShards]shard
	ringSize int
	ringSpan time.Duration // see timeline.span
	ringKeep int
	density  *densityConf
	users    userIndex  // connections by user id (notice.go)
	notices  noticeSeen // notice ids delivered here (notice.go)
}

// shard is one bucket of rooms, picked by FNV-1a of the room id, plus the
// connections whose sequence number falls into it (for pings, whether or
// not they joined a room). A connection in several rooms is a member of
// each room's list and once in its shard's connections. mu guards both
// maps: readers add and remove connections, joiners add rooms, the check
// loop removes them, the ping, online and check loops read them.
type shard struct {
	mu    sync.RWMutex
	rooms map[string]*room
	conns map[*conn]struct{}
}

func newHub(cfg Config) *hub {
	h := &hub{ringSize: cfg.RingSize, ringSpan: cfg.RingSpan,
		ringKeep: min(cfg.RingSize, max(cfg.HistoryOnJoin, 100)), density: newDensityConf(cfg)}
	for i := range h.shards {
		h.shards[i].rooms = map[string]*room{}
		h.shards[i].conns = map[*conn]struct{}{}
	}
	return h
}

// shardIndex is FNV-1a over the room id, inlined so it does not allocate.
func shardIndex(room string) uint32 {
	const offset32, prime32 = 2166136261, 16777619
	h := uint32(offset32)
	for i := 0; i < len(room); i++ {
		h ^= uint32(room[i])
		h *= prime32
	}
	return h % numShards
}

func (h *hub) roomShard(room string) *shard { return &h.shards[shardIndex(room)] }

func (h *hub) connShard(c *conn) *shard { return &h.shards[c.seq%numShards] }

// addConn makes c known to the ping sweep.
func (h *hub) addConn(c *conn) {
	sh := h.connShard(c)
	sh.mu.Lock()
	sh.conns[c] = struct{}{}
	sh.mu.Unlock()
	h.users.add(c)
}

// removeConn forgets c entirely (it must have left its room).
func (h *hub) removeConn(c *conn) {
	sh := h.connShard(c)
	sh.mu.Lock()
	delete(sh.conns, c)
	sh.mu.Unlock()
	h.users.remove(c)
}

// room returns the room id, or nil when this comet holds no state for it.
func (h *hub) room(id string) *room {
	sh := h.roomShard(id)
	sh.mu.RLock()
	r := sh.rooms[id]
	sh.mu.RUnlock()
	return r
}

// roomFor returns the room id, creating it when needed.
func (h *hub) roomFor(id string) *room {
	if r := h.room(id); r != nil {
		return r
	}
	sh := h.roomShard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r := sh.rooms[id]
	if r == nil {
		r = &room{id: id, tl: timeline.New(h.ringSize, h.ringSpan.Milliseconds(), h.ringKeep), emptySince: time.Now(), dc: h.density}
		sh.rooms[id] = r
	}
	return r
}

// lockRoom returns room id, created when needed, with its lock held and
// not dead.
func (h *hub) lockRoom(id string) *room {
	for {
		r := h.roomFor(id)
		r.mu.Lock()
		if !r.dead {
			return r
		}
		r.mu.Unlock()
	}
}

// leave removes m from its room, if it entered one; nothing of the room is
// queued for the viewer afterwards.
func (h *hub) leave(m *member) {
	r := m.r.Load()
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.r.Load() != r {
		return
	}
	r.removeLocked(m)
	last := len(r.members) - 1
	r.members[m.idx], r.conns[m.idx] = r.members[last], r.conns[last]
	r.members[m.idx].idx = m.idx
	r.members[last], r.conns[last] = nil, nil
	r.members, r.conns = r.members[:last], r.conns[:last]
	m.r.Store(nil)
	m.idx = 0
	m.c.w.Forget(r)
	if len(r.members) == 0 {
		r.members, r.conns = nil, nil
		r.emptySince = time.Now()
		// Job stops pushing the room's events here once the route is
		// gone: the next joiner reads the settings again (ensureState).
		r.stateKnown = false
		return
	}
	// Give memory back after a crowd left.
	if cap(r.members) > 64 && len(r.members) < cap(r.members)/4 {
		r.members = append([]*member(nil), r.members...)
		r.conns = append([]*conn(nil), r.conns...)
	}
}

// counts returns the number of rooms with local viewers and of
// connections.
func (h *hub) counts() (rooms, conns int) {
	var buf []*room
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.RLock()
		conns += len(sh.conns)
		sh.mu.RUnlock()
		buf = h.rooms(i, buf[:0])
		for _, r := range buf {
			r.mu.Lock()
			if len(r.members) > 0 {
				rooms++
			}
			r.mu.Unlock()
		}
	}
	return rooms, conns
}

// rooms appends the rooms of shard i to buf.
func (h *hub) rooms(i int, buf []*room) []*room {
	sh := &h.shards[i]
	sh.mu.RLock()
	for _, r := range sh.rooms {
		buf = append(buf, r)
	}
	sh.mu.RUnlock()
	return buf
}

// drop removes r from its shard when it has had no viewer for linger.
func (h *hub) drop(r *room, linger time.Duration, now time.Time) bool {
	sh := h.roomShard(r.id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.members) > 0 || now.Sub(r.emptySince) < linger || r.dead {
		return false
	}
	r.dead = true
	delete(sh.rooms, r.id)
	return true
}

// shardConns returns buf filled with the connections of shard i, taken
// under the lock; the caller clears it when done.
func (h *hub) shardConns(i int, buf []*conn) []*conn {
	sh := &h.shards[i]
	buf = buf[:0]
	sh.mu.RLock()
	for c := range sh.conns {
		buf = append(buf, c)
	}
	sh.mu.RUnlock()
	return buf
}

// forEachConn calls fn for every connection of shard i, outside the lock.
func (h *hub) forEachConn(i int, buf []*conn, fn func(*conn)) []*conn {
	buf = h.shardConns(i, buf)
	for _, c := range buf {
		fn(c)
	}
	clear(buf)
	return buf
}
