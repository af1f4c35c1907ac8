package comet

import (
	"runtime"
	"sync"
)

// The fan-out of a live frame. The push handler stages the frame in every
// viewer's queue under the room's lock (sendq.Writer.Stage: no goroutine
// started per viewer) and hands the room's viewers, in chunks, to the
// fan-out workers, one per core the runtime uses. A worker writes each
// viewer's queue with sends that do not wait (sendq.Writer.Flush); a viewer
// whose socket is full, or that is being written already, is left to its
// own drain. So a frame reaches ten thousand sockets from as many
// goroutines as there are cores, without a goroutine switch and a write
// deadline per viewer, and a slow viewer delays nobody.
//
// Chunks of frames with a high-priority message are taken before the
// others: a worker finishes its chunk, then takes the high lane's, so a
// high message waits for at most a chunk of writes per worker, not for
// the fan-out of the window frames queued before it. A viewer's own queue
// still goes out in order: flushing it for the high frame writes the
// window frame queued before it first.

// fanChunk is how many viewers a worker writes before it looks for a
// chunk of the high lane.
const fanChunk = 128

var fanout fanPool

// fanPool is the fan-out workers and their chunks of viewers to write.
type fanPool struct {
	once sync.Once
	wake chan struct{} // one token per chunk added, up to a worker each

	mu           sync.Mutex // guards the queues
	high, normal [][]*conn
}

// flush has conns, the viewers a frame was just staged for, written by the
// workers; high puts them in the high lane.
func (p *fanPool) flush(conns []*conn, high bool) {
	if len(conns) == 0 {
		return
	}
	p.once.Do(p.start)
	p.mu.Lock()
	n := 0
	for i := 0; i < len(conns); i += fanChunk {
		chunk := conns[i:min(i+fanChunk, len(conns))]
		if high {
			p.high = append(p.high, chunk)
		} else {
			p.normal = append(p.normal, chunk)
		}
		n++
	}
	p.mu.Unlock()
	for ; n > 0; n-- {
		select {
		case p.wake <- struct{}{}:
		default:
			return // every worker has a token already
		}
	}
}

func (p *fanPool) start() {
	k := runtime.GOMAXPROCS(0)
	p.wake = make(chan struct{}, k)
	for range k {
		go p.work()
	}
}

// work writes chunks, the high lane's first, and waits when there are none.
func (p *fanPool) work() {
	for range p.wake {
		for {
			chunk := p.take()
			if chunk == nil {
				break
			}
			for _, c := range chunk {
				c.w.Flush(c)
			}
		}
	}
}

// take returns the next chunk to write, or nil.
func (p *fanPool) take() []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := &p.normal
	if len(p.high) > 0 {
		q = &p.high
	}
	if len(*q) == 0 {
		return nil
	}
	chunk := (*q)[0]
	(*q)[0] = nil
	*q = (*q)[1:]
	if len(*q) == 0 {
		*q = nil
	}
	return chunk
}
