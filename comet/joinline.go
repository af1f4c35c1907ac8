package comet

import "sync"

// joinLines runs the joins of each room in turn: the first joiner of a
// room runs its join and then those queued meanwhile, until none is left;
// the others wait for theirs to be done. Each shard's mu guards its map
// and the queues in it; a queued fn runs on the goroutine of the room's
// first joiner, which closes done once it ran.
type joinLines struct {
	shards [16]joinShard
}

type joinShard struct {
	mu    sync.Mutex
	lines map[string]*joinLine
}

// joinLine is a room's queue of joins waiting for the running one.
type joinLine struct {
	queued []queuedJoin
}

type queuedJoin struct {
	fn   func()
	done chan struct{}
}

// run runs fn, a join of room, in turn with the room's other joins, and
// returns once it ran.
func (l *joinLines) run(room string, fn func()) {
	sh := &l.shards[shardIndex(room)%uint32(len(l.shards))]
	sh.mu.Lock()
	if q := sh.lines[room]; q != nil {
		done := make(chan struct{})
		q.queued = append(q.queued, queuedJoin{fn: fn, done: done})
		sh.mu.Unlock()
		<-done
		return
	}
	if sh.lines == nil {
		sh.lines = map[string]*joinLine{}
	}
	q := &joinLine{}
	sh.lines[room] = q
	sh.mu.Unlock()
	fn()
	for {
		sh.mu.Lock()
		batch := q.queued
		q.queued = nil
		if len(batch) == 0 {
			delete(sh.lines, room)
			sh.mu.Unlock()
			return
		}
		sh.mu.Unlock()
		for _, j := range batch {
			j.fn()
			close(j.done)
		}
	}
}
