package sendpath

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
	IDLen = 16
	// MaxNodeID is the largest node id a generator may carry.
	MaxNodeID = 1<<16 - 1
	// MaxClientIDLen is the longest client msgId that is always accepted:
	// with the "u<userId>-" prefix (at most 21 characters) it still fits
	// danmaku.MaxIDLen.
	MaxClientIDLen = 40
)

const base32hex = "0123456789abcdefghijklmnopqrstuv"

// IDGen hands out time-ordered ids without a lock: state packs the last
// millisecond used (high 48 bits) and the sequence within it (low 16).
// When a millisecond's 65,536 sequence numbers run out the sequence carries
// into the next millisecond, and a clock that steps back is ignored, so ids
// keep increasing either way.
type IDGen struct {
	node  uint64
	state atomic.Uint64
	now   func() time.Time
}

// NewIDGen returns a generator for node (0..MaxNodeID); a negative node
// picks a random one.
func NewIDGen(node int) *IDGen {
	if node < 0 {
		node = rand.IntN(MaxNodeID + 1)
	}
	return &IDGen{node: uint64(node), now: time.Now}
}

// Next returns a new id, greater than every id g returned before.
func (g *IDGen) Next() string {
	now := uint64(g.now().UnixMilli()) << 16
	for {
		old := g.state.Load()
		v := now
		if v <= old {
			v = old + 1
		}
		if g.state.CompareAndSwap(old, v) {
			return EncodeID(v>>16, g.node, v&0xffff)
		}
	}
}

// EncodeID is the id of sequence number seq of node in Unix millisecond ms.
func EncodeID(ms, node, seq uint64) string {
	// 80 bits as two 40-bit halves, eight characters each.
	hi := ms >> 8
	lo := (ms&0xff)<<32 | node<<16 | seq
	var b [IDLen]byte
	for i := 7; i >= 0; i-- {
		b[i] = base32hex[hi&31]
		hi >>= 5
		b[8+i] = base32hex[lo&31]
		lo >>= 5
	}
	return string(b[:])
}

// IDTime returns the millisecond encoded in a generated id.
func IDTime(id string) (time.Time, bool) {
	if len(id) != IDLen {
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

// ClientMsgID namespaces a client's idempotency key by its user so two
// users choosing the same key never share a message id: "abc" from user 7
// becomes "u7-abc". An id that already carries the user's prefix (a client
// resending the id it was given) is kept as it is, so retrying with either
// form yields the same id.
func ClientMsgID(field string, uid int64, id string) (string, error) {
	return NamespacedID(field, "u"+strconv.FormatInt(uid, 10)+"-", id)
}

// NamespacedID returns prefix + id for the client's idempotency key id, or
// id itself when it already carries the prefix; the result must pass
// danmaku.CheckID. The error names field.
func NamespacedID(field, prefix, id string) (string, error) {
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
