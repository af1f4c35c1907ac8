package comet

import (
	"sync"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/comet/internal/sendq"
	"github.com/danmaku/danmaku/comet/internal/timeline"
)

// Notices job pushes to /push (danmaku.NoticePush): with op "user" the
// notices of each user go to every local connection of the user, as one
// frame {"op":"user","msgs":[...]}, whatever rooms the connections are in;
// with op "all" one frame {"op":"all","msgs":[...]} goes to every local
// connection. Each frame is encoded once and handed to every connection it
// is for. A notice id this comet already took (the last noticeMemory of
// them) is dropped, so a push that job delivers again after a crash or a
// retry is not shown twice. Notices have no position: a viewer whose queue
// overflows keeps its queued notice frames (only positioned room frames
// are dropped for a catch-up), and one cut as a slow consumer, or away
// while a notice went out, does not get it again.

// noticeMemory bounds the notice ids a comet remembers for dedup: at 2,000
// notices a second, about half a minute of them.
const noticeMemory = 1 << 16

// noticeSeen is the comet's bounded memory of notice ids, oldest dropped
// first. mu guards seen; the push handlers (one per push) take it.
type noticeSeen struct {
	mu   sync.Mutex
	seen timeline.IDSet
}

// fresh returns the notices of msgs whose id it has not seen, and
// remembers them; msgs itself when all are new.
func (s *noticeSeen) fresh(msgs []danmaku.Notice) []danmaku.Notice {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := msgs
	for i, n := range msgs {
		if !s.seen.Add(n.ID, noticeMemory) {
			if len(out) == len(msgs) {
				out = append([]danmaku.Notice(nil), msgs[:i]...)
			}
			continue
		}
		if len(out) != len(msgs) {
			out = append(out, n)
		}
	}
	return out
}

// userIndex is the comet's connections by user id, in shards picked like
// the rooms'. Only connections whose user id a token proved are in it: a
// uid parameter alone is a claim anybody can make, and user notices are
// private. Each shard's mu guards its map: readers add and remove their
// connection (hub.addConn, removeConn), push handlers read it.
type userIndex struct {
	shards [numShards]struct {
		mu    sync.RWMutex
		conns map[string][]*conn
	}
}

func (u *userIndex) add(c *conn) {
	if c.user == "" || !c.proven() {
		return
	}
	sh := &u.shards[shardIndex(c.user)]
	sh.mu.Lock()
	if sh.conns == nil {
		sh.conns = map[string][]*conn{}
	}
	sh.conns[c.user] = append(sh.conns[c.user], c)
	sh.mu.Unlock()
}

func (u *userIndex) remove(c *conn) {
	if c.user == "" || !c.proven() {
		return
	}
	sh := &u.shards[shardIndex(c.user)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	unindex(sh.conns, c.user, c)
}

// unindex removes v from index[k] (order is not kept), and the key when
// nothing is left under it.
func unindex[K, V comparable](index map[K][]V, k K, v V) {
	list := index[k]
	for i, o := range list {
		if o == v {
			var zero V
			list[i] = list[len(list)-1]
			list[len(list)-1] = zero
			list = list[:len(list)-1]
			break
		}
	}
	if len(list) == 0 {
		delete(index, k)
		return
	}
	index[k] = list
}

// appendConns appends the local connections of user to buf.
func (u *userIndex) appendConns(user string, buf []*conn) []*conn {
	sh := &u.shards[shardIndex(user)]
	sh.mu.RLock()
	buf = append(buf, sh.conns[user]...)
	sh.mu.RUnlock()
	return buf
}

// noticeItem encodes a frame of notices once for every connection it goes
// to.
func noticeItem(op string, msgs []danmaku.Notice) (item, bool) {
	return frameItem(danmaku.NoticeFrame{Op: op, Msgs: msgs})
}

// enqueueAll hands it to every connection of conns without blocking and
// returns how many took it and the ones to cut (queue overflowed).
func enqueueAll(it item, conns []*conn, slow []*conn) (int, []*conn) {
	n := 0
	for _, c := range conns {
		n, slow = tally(c.enqueue(it), c, n, slow)
	}
	return n, slow
}

// tally counts what became of a frame handed to c: one more viewer
// reached, or c among the viewers to cut.
func tally(res sendq.Result, c *conn, n int, slow []*conn) (int, []*conn) {
	switch res {
	case enqueued:
		n++
	case queueFull:
		slow = append(slow, c)
	}
	return n, slow
}

// deliverNotices hands a notice push to the local connections it is for
// and returns how many frames were handed out and how many notices were
// dropped as already seen.
func (s *Server) deliverNotices(p *danmaku.NoticePush) (delivered, dups int) {
	var slow, buf []*conn
	switch p.Op {
	case danmaku.OpUser:
		for _, un := range p.Users {
			fresh := s.hub.notices.fresh(un.Msgs)
			dups += len(un.Msgs) - len(fresh)
			buf = s.hub.users.appendConns(un.User, buf[:0])
			if len(fresh) == 0 || len(buf) == 0 {
				continue
			}
			it, ok := noticeItem(danmaku.OpUser, fresh)
			if !ok {
				continue
			}
			var n int
			n, slow = enqueueAll(it, buf, slow)
			delivered += n
		}
		clear(buf)
	case danmaku.OpAll:
		fresh := s.hub.notices.fresh(p.Msgs)
		dups = len(p.Msgs) - len(fresh)
		if len(fresh) == 0 {
			break
		}
		it, ok := noticeItem(danmaku.OpAll, fresh)
		if !ok {
			break
		}
		for i := range s.hub.shards {
			buf = s.hub.shardConns(i, buf)
			var n int
			n, slow = enqueueAll(it, buf, slow)
			delivered += n
		}
		clear(buf)
	}
	s.cut(slow)
	return delivered, dups
}

// noticeCount is the number of notices in p.
func noticeCount(p *danmaku.NoticePush) int {
	n := len(p.Msgs)
	for _, un := range p.Users {
		n += len(un.Msgs)
	}
	return n
}
