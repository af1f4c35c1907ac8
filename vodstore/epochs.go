package vodstore

import "sync"

// Timeline epochs (migrations 004_epochs.sql). A position counts from 1
// again when its room's timeline starts over, so a comment is stored with
// the epoch of its position: each stream numbers the epochs of its
// comments 1, 2... in vod_epochs, and a comment keeps the number in the
// bits of its stored flags above the flags (0: no epoch known).

// maxEpochs is how many epochs one stream numbers (6 bits). A comment
// positioned in a later one is stored without its position, never with
// an ambiguous one; its stream's timeline would have started over 63
// times.
const maxEpochs = 63

// epochShift is where the epoch's number starts in the stored flags.
const epochShift = 2

type epochKey struct {
	sid   int64
	epoch string
}

// epochNumbers remembers the numbers committed: once given, a number
// never changes (retention removes it with its stream, and stream keys
// are never reused).
type epochNumbers struct {
	mu    sync.Mutex
	known map[epochKey]int
}

// epochsKnownMax bounds what epochNumbers remembers; past it, it starts
// over and reads numbers from the database again.
const epochsKnownMax = 100_000

// epochSQL is an engine's statements for numbering epochs, each with the
// arguments (sid, epoch), (sid) and (sid, n, epoch).
type epochSQL struct{ find, last, add string }

// epochTx runs epochSQL in a write's transaction: one returns the
// integer of a query's single row, or false for no row.
type epochTx struct {
	one  func(q string, args ...any) (int64, bool, error)
	exec func(q string, args ...any) error
}

// numbers returns the number of every epoch that b's rows and positions
// with a position name, numbering the ones new to their stream through
// tx (0: the stream has maxEpochs already).
func (e *epochNumbers) numbers(b *Batch, q epochSQL, tx epochTx) (map[epochKey]int, error) {
	var out map[epochKey]int
	need := func(sid int64, epoch string, pos int64) error {
		k := epochKey{sid, epoch}
		if epoch == "" || pos == 0 {
			return nil
		} else if _, ok := out[k]; ok {
			return nil
		}
		if out == nil {
			out = map[epochKey]int{}
		}
		e.mu.Lock()
		n, ok := e.known[k]
		e.mu.Unlock()
		if !ok {
			var err error
			if n, err = number(k, q, tx); err != nil {
				return wrap("write epochs", err)
			}
		}
		out[k] = n
		return nil
	}
	for _, r := range b.Rows {
		if err := need(r.SID, r.Epoch, r.Pos); err != nil {
			return nil, err
		}
	}
	for _, p := range b.Positions {
		if err := need(p.SID, p.Epoch, p.Pos); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// number finds k's number, or gives it the next one of its stream.
func number(k epochKey, q epochSQL, tx epochTx) (int, error) {
	n, ok, err := tx.one(q.find, k.sid, k.epoch)
	if err != nil || ok {
		return int(n), err
	}
	if n, _, err = tx.one(q.last, k.sid); err != nil || n >= maxEpochs {
		return 0, err
	}
	return int(n) + 1, tx.exec(q.add, k.sid, n+1, k.epoch)
}

// learn remembers the numbers of a write that committed.
func (e *epochNumbers) learn(m map[epochKey]int) {
	if len(m) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.known == nil || len(e.known) > epochsKnownMax {
		e.known = map[epochKey]int{}
	}
	for k, n := range m {
		if n > 0 {
			e.known[k] = n
		}
	}
}

// stored returns what a comment positioned at pos in epoch of stream sid
// keeps: its position (0 for none) and its stored flags, with the epoch's
// number from nums.
func stored(sid int64, c *Comment, nums map[epochKey]int) (pos int64, flags uint8) {
	flags = uint8(c.Flags) & (1<<epochShift - 1)
	if c.Pos == 0 || c.Epoch == "" {
		return c.Pos, flags
	}
	n := nums[epochKey{sid, c.Epoch}]
	if n == 0 {
		return 0, flags // over maxEpochs
	}
	return c.Pos, flags | uint8(n)<<epochShift
}

// epochOf turns stored flags back into the comment's flags and epoch,
// from its stream's epochs by number.
func epochOf(c *Comment, names map[int]string) {
	raw := uint8(c.Flags)
	c.Flags = int16(raw & (1<<epochShift - 1))
	if n := int(raw >> epochShift); n > 0 {
		c.Epoch = names[n]
	}
}

// anyEpoch reports whether comments as scanned name an epoch.
func anyEpoch(cs []Comment) bool {
	for _, c := range cs {
		if uint8(c.Flags)>>epochShift != 0 {
			return true
		}
	}
	return false
}

// withEpochs reads a stream's epochs (n, epoch) and gives the comments
// of the stream, as scanned, their flags and epochs.
func withEpochs(rs rows, cs []Comment) error {
	names := map[int]string{}
	for rs.Next() {
		var n int
		var epoch string
		if err := rs.Scan(&n, &epoch); err != nil {
			return wrap("epochs", err)
		}
		names[n] = epoch
	}
	if err := rs.Err(); err != nil {
		return wrap("epochs", err)
	}
	for i := range cs {
		epochOf(&cs[i], names)
	}
	return nil
}
