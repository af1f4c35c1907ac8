package logic

import (
	"net/netip"
	"sync"
	"time"
)

// maxReadBuckets bounds the addresses a readLimiter remembers.
const maxReadBuckets = 1 << 16

// readLimiter is a token bucket per client address for reads that cost
// logic bandwidth (GET /logic/history). Unlike the send limits it lives in
// the memory of each logic instance: what it protects is that instance's
// CPU and network, and a read needs no Redis round trip for it. It is safe
// for concurrent use; nothing waits while holding its lock.
type readLimiter struct {
	rate  float64 // tokens per second; 0: no limit
	burst float64
	now   func() time.Time

	mu        sync.Mutex // guards buckets, swept
	buckets   map[string]readBucket
	swept     time.Time
	sweepGone time.Duration // a bucket untouched this long is full again
}

type readBucket struct {
	tokens float64
	at     time.Time
}

func newReadLimiter(rate float64, burst int) *readLimiter {
	l := &readLimiter{rate: rate, burst: float64(burst), now: time.Now, buckets: make(map[string]readBucket)}
	if rate > 0 {
		l.sweepGone = time.Duration(float64(burst) / rate * float64(time.Second))
	}
	return l
}

// allow takes a token from ip's bucket; when there is none it returns
// false and how long until there is one.
func (l *readLimiter) allow(ip string) (ok bool, retry time.Duration) {
	if l.rate <= 0 {
		return true, 0
	}
	key := readKey(ip)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, found := l.buckets[key]
	if found {
		b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	} else {
		l.makeRoomLocked(now)
		b.tokens = l.burst
	}
	b.at = now
	if b.tokens < 1 {
		l.buckets[key] = b
		return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	}
	b.tokens--
	l.buckets[key] = b
	return true, 0
}

// makeRoomLocked keeps the map under maxReadBuckets: it forgets buckets
// that are full again (the same as a new one), at most once a second, and
// when that is not enough (reads from more addresses than the map holds
// within a refill time) forgets every bucket.
func (l *readLimiter) makeRoomLocked(now time.Time) {
	if len(l.buckets) < maxReadBuckets {
		return
	}
	if now.Sub(l.swept) >= time.Second {
		l.swept = now
		for k, b := range l.buckets {
			if now.Sub(b.at) >= l.sweepGone {
				delete(l.buckets, k)
			}
		}
	}
	if len(l.buckets) >= maxReadBuckets {
		clear(l.buckets)
	}
}

// readKey is the bucket of a client address: IPv6 addresses by their /64,
// as the send limits count them, since one host usually holds a whole /64.
func readKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Is4() {
		return ip
	}
	p, _ := a.Prefix(64)
	return p.String()
}
