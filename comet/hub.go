package comet

import (
	"sync"

	"github.com/danmaku/danmaku"
)

// numShards is the number of hub shards. A power of two; 64 keeps lock
// contention low on a few cores without making a broadcast sweep expensive.
const numShards = 64

// hub holds the rooms and connections of this comet in memory.
//
// Lock order: shard.mu, then room.mu, then conn.mu. No code holds two shard
// locks at once (a room switch leaves the old shard before entering the new
// one), and nothing blocks while holding any of them: enqueueing is a
// non-blocking append, socket writes happen in the connection's writer.
type hub struct {
	shards    [numShards]shard
	recentIDs int
}

// shard is one bucket of rooms, picked by FNV-1a of the room id, plus the
// connections whose sequence number falls into it (for pings, whether or
// not they joined a room).
type shard struct {
	mu    sync.RWMutex
	rooms map[string]*room
	conns map[*conn]struct{}
}

// room is the local viewers of one room and the ids of the messages
// recently sent to them.
type room struct {
	id    string
	conns []*conn // conn.idx is the position; guarded by the shard lock

	mu     sync.Mutex // guards seen, ring, next
	seen   map[string]struct{}
	ring   []string
	next   int
	filled bool
}

func newHub(recentIDs int) *hub {
	h := &hub{recentIDs: recentIDs}
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
}

// removeConn forgets c entirely (it must have left its room).
func (h *hub) removeConn(c *conn) {
	sh := h.connShard(c)
	sh.mu.Lock()
	delete(sh.conns, c)
	sh.mu.Unlock()
}

// join adds c to the local viewers of id and queues first, its welcome
// frame, under the shard lock: a broadcast to the room (which holds the
// read lock while it enqueues) lands either wholly before the viewer
// joined or after its welcome. c must not be in a room.
func (h *hub) join(c *conn, id string, first item) enqueueResult {
	sh := h.roomShard(id)
	sh.mu.Lock()
	res := c.enqueue(first)
	r := sh.rooms[id]
	if r == nil {
		r = &room{id: id}
		sh.rooms[id] = r
	}
	c.room, c.idx = r, len(r.conns)
	r.conns = append(r.conns, c)
	sh.mu.Unlock()
	return res
}

// leave removes c from its room, if any, and reports whether the room
// became empty (and was dropped).
func (h *hub) leave(c *conn, id string) (emptied bool) {
	sh := h.roomShard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r := c.room
	if r == nil || r.id != id {
		return false
	}
	last := len(r.conns) - 1
	r.conns[c.idx] = r.conns[last]
	r.conns[c.idx].idx = c.idx
	r.conns[last] = nil
	r.conns = r.conns[:last]
	c.room, c.idx = nil, 0
	if len(r.conns) == 0 {
		delete(sh.rooms, id)
		return true
	}
	// Give memory back after a crowd left.
	if cap(r.conns) > 64 && len(r.conns) < cap(r.conns)/4 {
		r.conns = append([]*conn(nil), r.conns...)
	}
	return false
}

// local returns the number of local viewers of id.
func (h *hub) local(id string) int {
	sh := h.roomShard(id)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if r := sh.rooms[id]; r != nil {
		return len(r.conns)
	}
	return 0
}

// counts returns the number of rooms and of connections.
func (h *hub) counts() (rooms, conns int) {
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.RLock()
		rooms += len(sh.rooms)
		conns += len(sh.conns)
		sh.mu.RUnlock()
	}
	return rooms, conns
}

// fresh returns the messages of msgs this room has not been sent recently
// and remembers them. With no local viewers it returns nil: nothing is
// remembered for a room nobody watches here.
func (h *hub) fresh(id string, msgs []danmaku.Message) (out []danmaku.Message, found bool) {
	sh := h.roomShard(id)
	sh.mu.RLock()
	r := sh.rooms[id]
	if r == nil {
		sh.mu.RUnlock()
		return nil, false
	}
	r.mu.Lock()
	out = r.remember(msgs, h.recentIDs)
	r.mu.Unlock()
	sh.mu.RUnlock()
	return out, true
}

// remember filters out the ids already seen and records the others. When
// nothing is dropped it returns msgs itself, without copying; otherwise a
// new slice with the fresh messages in their order. The caller encodes
// whatever it returns into one frame.
func (r *room) remember(msgs []danmaku.Message, capacity int) []danmaku.Message {
	if capacity == 0 {
		return msgs
	}
	if r.seen == nil {
		r.seen = make(map[string]struct{}, min(capacity, 64))
	}
	out := msgs
	copied := false
	for i, m := range msgs {
		_, dup := r.seen[m.ID]
		if !dup {
			// Also catch a duplicate inside the batch itself.
			r.add(m.ID, capacity)
		}
		switch {
		case dup && !copied:
			out = append(make([]danmaku.Message, 0, len(msgs)-1), msgs[:i]...)
			copied = true
		case !dup && copied:
			out = append(out, m)
		}
	}
	return out
}

// add records id in the ring, evicting the oldest once full.
func (r *room) add(id string, capacity int) {
	if len(r.ring) < capacity {
		r.ring = append(r.ring, id)
	} else {
		delete(r.seen, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % capacity
	}
	r.seen[id] = struct{}{}
}

// deliver enqueues it to every local viewer of id without blocking. It
// returns the number of viewers the frame was handed to and appends the
// viewers whose queue overflowed to slow (the caller disconnects them after
// the shard lock is released).
func (h *hub) deliver(id string, it item, slow []*conn) (int, []*conn) {
	sh := h.roomShard(id)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	r := sh.rooms[id]
	if r == nil {
		return 0, slow
	}
	n := 0
	for _, c := range r.conns {
		switch c.enqueue(it) {
		case enqueued:
			n++
		case queueFull:
			slow = append(slow, c)
		}
	}
	return n, slow
}

// forEachConn calls fn for every connection of shard i, outside the lock.
func (h *hub) forEachConn(i int, buf []*conn, fn func(*conn)) []*conn {
	sh := &h.shards[i]
	buf = buf[:0]
	sh.mu.RLock()
	for c := range sh.conns {
		buf = append(buf, c)
	}
	sh.mu.RUnlock()
	for _, c := range buf {
		fn(c)
	}
	clear(buf)
	return buf
}
