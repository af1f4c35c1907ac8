package sendpath

import (
	"context"
	"sync"
	"time"

	"github.com/danmaku/danmaku/route"
)

// Room settings (danmaku.RoomState) live in Redis (route.SetRoomState).
// Every Path reads a room's settings at most once per stateFresh for its
// sends, so a change made anywhere holds on every Path within stateFresh
// plus one Redis read; the one that made it applies it at once
// (RefreshRoom).

// stateFresh is how long a Path uses a room's settings before it reads
// them again.
const stateFresh = 500 * time.Millisecond

// maxStates bounds the rooms whose settings a Path keeps; beyond it, the
// ones older than stateFresh (which a send would read again anyway) go.
const maxStates = 10000

// roomStates is a Path's view of the settings of the rooms it serves.
type roomStates struct {
	mu sync.Mutex
	m  map[string]*stateEntry
}

type stateEntry struct {
	st         route.Room
	at         time.Time // when st was read; zero until the first read ends
	refreshing bool      // a caller is reading it again; others use st
	// first is closed when the room's first read ends: the callers that
	// came meanwhile wait for it rather than all read at once.
	first chan struct{}
}

func newRoomStates() *roomStates { return &roomStates{m: map[string]*stateEntry{}} }

// lookup returns room's settings when they are fresh, or when another
// caller is reading them again (the stale ones meanwhile: a hot room is
// read once per stateFresh, not by every send that finds it stale). While
// the room's first read is on its way it returns a channel to wait on
// and look up again. Else it reports false and marks the room as being
// read: the caller reads it and calls put or failed.
func (c *roomStates) lookup(room string, now time.Time) (st route.Room, ok bool, wait <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[room]
	switch {
	case e == nil:
		c.m[room] = &stateEntry{refreshing: true, first: make(chan struct{})}
		return st, false, nil
	case e.at.IsZero():
		return st, false, e.first
	case now.Sub(e.at) < stateFresh || e.refreshing:
		return e.st, true, nil
	}
	e.refreshing = true
	return e.st, false, nil
}

// put records room's settings as read at; a state of a lower version
// than the one kept (a read that raced with a change made here) leaves
// the kept one.
func (c *roomStates) put(room string, st route.Room, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxStates {
		for r, e := range c.m {
			if at.Sub(e.at) >= stateFresh && !e.refreshing {
				delete(c.m, r)
			}
		}
	}
	e := c.m[room]
	if e == nil {
		e = &stateEntry{}
		c.m[room] = e
	}
	if st.State.Ver >= e.st.State.Ver {
		e.st = st
	}
	e.at, e.refreshing = at, false
	if e.first != nil {
		close(e.first)
		e.first = nil
	}
}

// refresh reads room again after a change made here, so this Path
// applies it at once.
func (c *roomStates) refresh(ctx context.Context, store Store, room string, now time.Time) {
	if st, err := store.ReadRoom(ctx, room); err == nil {
		c.put(room, st, now)
	}
}

// failed ends a read of room that did not answer: the next caller tries
// again.
func (c *roomStates) failed(room string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[room]; e != nil {
		e.refreshing = false
		if e.at.IsZero() {
			close(e.first) // the waiters look up again; one of them reads
			delete(c.m, room)
		}
	}
}

// RoomState returns room's settings and hidden users as this Path sees
// them: read from Redis when older than stateFresh. A read that fails is
// an EUNAVAILABLE error.
func (p *Path) RoomState(ctx context.Context, room string) (route.Room, error) {
	now := time.Now()
	st, ok, wait := p.states.lookup(room, now)
	if ok {
		return st, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RedisTimeout)
	defer cancel()
	for wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return st, p.redisError("room state", ctx.Err())
		}
		if st, ok, wait = p.states.lookup(room, now); ok {
			return st, nil
		}
	}
	st, err := p.store.ReadRoom(ctx, room)
	if err != nil {
		p.states.failed(room)
		return st, p.redisError("room state", err)
	}
	p.states.put(room, st, now)
	return st, nil
}

// RefreshRoom reads room again after a change made through this Path's
// role, so its sends apply the change at once.
func (p *Path) RefreshRoom(ctx context.Context, room string, now time.Time) {
	p.states.refresh(ctx, p.store, room, now)
}
