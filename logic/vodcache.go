package logic

import (
	"context"
	"sync"
	"time"
)

// vodCache keeps VOD answers in memory, by URL:
//   - an answer about an ended stream (final) never changes: kept until
//     evicted;
//   - an answer about a live stream is served for fresh (logic.vod_live_cache)
//     from memory, then, for up to vodStale more, still served while one
//     background read brings it up to date, so a popular live segment
//     costs the database one read per fresh period whatever the request
//     rate, and no request waits for that read;
//   - requests for an answer nobody holds share one database read.
//
// With fresh 0 live answers are not kept: a request for one reads the
// database, or, while a read of the same answer is in flight, waits for
// that read and gets its answer (at most one read behind). A burst of
// requests for one answer (a miss storm) then costs one read at a time,
// not one each: their number cannot pile reads up on the database.
//
// The answers held are bounded by vodCacheBytes, evicted at random.
type vodCache struct {
	fresh time.Duration

	mu      sync.Mutex // guards entries, bytes, loading
	entries map[string]*vodCacheEntry
	bytes   int
	loading map[string]*vodLoad
}

type vodCacheEntry struct {
	body  []byte
	etag  string
	final bool
	at    time.Time // when it was read
	// refreshing is set while a background read replaces it.
	refreshing bool
}

// vodLoad is a database read that requests for one key wait on.
type vodLoad struct {
	done chan struct{}
	e    *vodCacheEntry
	err  error
}

const (
	// vodStale is how long past fresh a live answer is still served
	// while it is read again; older ones are read before answering.
	vodStale = 10 * time.Second
	// vodCacheBytes bounds the bodies held.
	vodCacheBytes = 64 << 20
)

func newVODCache(fresh time.Duration) *vodCache {
	return &vodCache{fresh: fresh, entries: map[string]*vodCacheEntry{}, loading: map[string]*vodLoad{}}
}

// get returns the answer of key, from memory when it may, else from read
// (run with a context of its own, bounded by vodTimeout, so a client that
// leaves does not fail the others waiting for the same read). hit says
// whether the database was spared.
func (c *vodCache) get(ctx context.Context, key string, read func(context.Context) (*vodCacheEntry, error)) (e *vodCacheEntry, hit bool, err error) {
	now := time.Now()
	c.mu.Lock()
	if e := c.entries[key]; e != nil {
		age := now.Sub(e.at)
		if e.final || age < c.fresh {
			c.mu.Unlock()
			return e, true, nil
		}
		if age < c.fresh+vodStale {
			if !e.refreshing {
				e.refreshing = true
				go c.load(key, read)
			}
			c.mu.Unlock()
			return e, true, nil
		}
	}
	l := c.loading[key]
	if l == nil {
		l = c.startLocked(key)
		c.mu.Unlock()
		c.finish(key, l, read)
	} else {
		c.mu.Unlock()
	}
	select {
	case <-l.done:
		return l.e, false, l.err
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// load reads key again in the background.
func (c *vodCache) load(key string, read func(context.Context) (*vodCacheEntry, error)) {
	c.mu.Lock()
	l := c.loading[key]
	if l != nil {
		c.mu.Unlock()
		return
	}
	l = c.startLocked(key)
	c.mu.Unlock()
	c.finish(key, l, read)
}

func (c *vodCache) startLocked(key string) *vodLoad {
	l := &vodLoad{done: make(chan struct{})}
	c.loading[key] = l
	return l
}

// finish runs read for l and keeps what it read.
func (c *vodCache) finish(key string, l *vodLoad, read func(context.Context) (*vodCacheEntry, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), vodTimeout)
	l.e, l.err = read(ctx)
	cancel()
	c.mu.Lock()
	delete(c.loading, key)
	if old := c.entries[key]; old != nil {
		old.refreshing = false
	}
	if l.err == nil && (l.e.final || c.fresh > 0) {
		l.e.at = time.Now()
		c.putLocked(key, l.e)
	}
	c.mu.Unlock()
	close(l.done)
}

func (c *vodCache) putLocked(key string, e *vodCacheEntry) {
	if old := c.entries[key]; old != nil {
		c.bytes -= len(old.body)
		delete(c.entries, key)
	}
	for k, old := range c.entries { // random victims, while over budget
		if c.bytes+len(e.body) <= vodCacheBytes && len(c.entries) < vodCacheEntries {
			break
		}
		c.bytes -= len(old.body)
		delete(c.entries, k)
	}
	c.entries[key] = e
	c.bytes += len(e.body)
}
