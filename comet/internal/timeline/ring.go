package timeline

import "github.com/danmaku/danmaku"

// ring is a room's recent messages, oldest first: a circular buffer that
// grows by doubling up to max entries, so a quiet room holds a few
// messages, not max. It is part of a timeline and guarded as it is (the
// room's lock).
type ring struct {
	buf  []danmaku.Message
	head int // index of the oldest entry in buf
	n    int
	max  int
}

func (q *ring) at(i int) *danmaku.Message { return &q.buf[(q.head+i)%len(q.buf)] }

func (q *ring) full() bool { return q.n >= q.max }

func (q *ring) grow() {
	if q.n < len(q.buf) {
		return
	}
	nb := make([]danmaku.Message, min(q.max, max(16, 2*len(q.buf))))
	for i := range q.n {
		nb[i] = *q.at(i)
	}
	q.buf, q.head = nb, 0
}

// pushBack appends m; a full ring evicts and returns its oldest entry.
func (q *ring) pushBack(m danmaku.Message) (evicted danmaku.Message, ok bool) {
	if q.n >= q.max {
		evicted = q.buf[q.head]
		q.buf[q.head] = m
		q.head = (q.head + 1) % len(q.buf)
		return evicted, true
	}
	q.grow()
	q.buf[(q.head+q.n)%len(q.buf)] = m
	q.n++
	return evicted, false
}

// popFront removes and returns the oldest entry; the ring must not be
// empty.
func (q *ring) popFront() danmaku.Message {
	m := q.buf[q.head]
	q.buf[q.head] = danmaku.Message{}
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return m
}

// pushFront puts m before the oldest entry; the ring must not be full.
func (q *ring) pushFront(m danmaku.Message) {
	q.grow()
	q.head = (q.head - 1 + len(q.buf)) % len(q.buf)
	q.buf[q.head] = m
	q.n++
}

// removeIf drops the entries for which drop reports true, keeping the
// order of the others, and returns how many were dropped and how many of
// them were among the first front entries.
func (q *ring) removeIf(front int, drop func(*danmaku.Message) bool) (n, inFront int) {
	kept := 0
	for i := range q.n {
		m := q.at(i)
		if drop(m) {
			n++
			if i < front {
				inFront++
			}
			continue
		}
		if kept != i {
			*q.at(kept) = *m
		}
		kept++
	}
	for i := kept; i < q.n; i++ {
		*q.at(i) = danmaku.Message{}
	}
	q.n = kept
	return n, inFront
}
