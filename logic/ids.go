package logic

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/danmaku/danmaku"
)

// Generated message ids are 16 characters of lowercase base32hex
// (0-9a-v, which sorts in ASCII order like the values it encodes) over 80
// bits: 48 bits of Unix milliseconds, 16 bits of node id, 16 bits of
// sequence. Ids of one instance strictly increase; ids of different
// instances order by millisecond. They never contain '-', so they cannot
// collide with client-supplied ids, which are always stored as
// "u<userId>-<clientId>".
const (
	idLen     = 16
	maxNodeID = 1<<16 - 1
	// MaxClientIDLen is the longest client msgId that is always accepted:
	// with the "u<userId>-" prefix (at most 21 characters) it still fits
	// danmaku.MaxIDLen.
	MaxClientIDLen = 40
)

const base32hex = "0123456789abcdefghijklmnopqrstuv"

// idGen hands out time-ordered ids without a lock: state packs the last
// millisecond used (high 48 bits) and the sequence within it (low 16).
// When a millisecond's 65,536 sequence numbers run out the sequence carries
// into the next millisecond, and a clock that steps back is ignored, so ids
// keep increasing either way.
type idGen struct {
	node  uint64
	state atomic.Uint64
	now   func() time.Time
}

func newIDGen(node int) *idGen {
	if node < 0 {
		node = rand.IntN(maxNodeID + 1)
	}
	return &idGen{node: uint64(node), now: time.Now}
}

// next returns a new id, greater than every id g returned before.
func (g *idGen) next() string {
	now := uint64(g.now().UnixMilli()) << 16
	for {
		old := g.state.Load()
		v := now
		if v <= old {
			v = old + 1
		}
		if g.state.CompareAndSwap(old, v) {
			return encodeID(v>>16, g.node, v&0xffff)
		}
	}
}

func encodeID(ms, node, seq uint64) string {
	// 80 bits as two 40-bit halves, eight characters each.
	hi := ms >> 8
	lo := (ms&0xff)<<32 | node<<16 | seq
	var b [idLen]byte
	for i := 7; i >= 0; i-- {
		b[i] = base32hex[hi&31]
		hi >>= 5
		b[8+i] = base32hex[lo&31]
		lo >>= 5
	}
	return string(b[:])
}

// idTime returns the millisecond encoded in a generated id.
func idTime(id string) (time.Time, bool) {
	if len(id) != idLen {
		return time.Time{}, false
	}
	var hi, lo uint64
	for i := 0; i < 8; i++ {
		a, b := strings.IndexByte(base32hex, id[i]), strings.IndexByte(base32hex, id[8+i])
		if a < 0 || b < 0 {
			return time.Time{}, false
		}
		hi = hi<<5 | uint64(a)
		lo = lo<<5 | uint64(b)
	}
	return time.UnixMilli(int64(hi<<8 | lo>>32)), true
}

// clientMsgID namespaces a client's idempotency key by its user so two
// users choosing the same key never share a message id: "abc" from user 7
// becomes "u7-abc". An id that already carries the user's prefix (a client
// resending the id it was given) is kept as it is, so retrying with either
// form yields the same id.
func clientMsgID(field string, uid int64, id string) (string, error) {
	return namespacedID(field, "u"+strconv.FormatInt(uid, 10)+"-", id)
}

// namespacedID returns prefix + id for the client's idempotency key id, or
// id itself when it already carries the prefix; the result must pass
// danmaku.CheckID. The error names field.
func namespacedID(field, prefix, id string) (string, error) {
	if strings.HasPrefix(id, prefix) && len(id) > len(prefix) {
		return id, danmaku.CheckID(field, id)
	}
	if limit := danmaku.MaxIDLen - len(prefix); len(id) > limit {
		return "", danmaku.Errorf(danmaku.EINVALID, field,
			"longer than %d characters: it is stored as %q + msgId, %d characters in all", limit, prefix, danmaku.MaxIDLen)
	}
	if err := danmaku.CheckID(field, id); err != nil {
		return "", err
	}
	return prefix + id, nil
}
