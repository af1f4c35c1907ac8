package route

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/danmaku/danmaku"
)

var (
	beginBroadcastScript = script("begin_broadcast")
	endBroadcastScript   = script("end_broadcast")
	abortBroadcastScript = script("abort_broadcast")
)

// DefaultClaimTTL is how long BeginBroadcast's claims (the dedup keys of
// messages) live when BeginOptions.ClaimTTL is 0: job.Config's
// processed_ttl.
const DefaultClaimTTL = 60 * time.Second

// ClaimState is the outcome of claiming one message id.
type ClaimState int

const (
	// Claimed: the caller owns the message now and must deliver it, then
	// mark it with EndBroadcast (or let the claim expire when delivery
	// failed).
	Claimed ClaimState = iota
	// Processed: delivered before; skip it.
	Processed
	// Busy: another owner claimed it and has neither finished nor let the
	// claim expire; try again after a while. Only events and notices, and
	// claims written by earlier versions, are in this state.
	Busy
	// Positioned: claimed before, and given the position Begin.Pos in the
	// room's current epoch, where the history holds it. The caller pushes
	// it with that position (comets drop a position they already
	// delivered) and never asks for another.
	Positioned
)

func (c ClaimState) String() string {
	switch c {
	case Claimed:
		return "claimed"
	case Processed:
		return "processed"
	case Busy:
		return "busy"
	case Positioned:
		return "positioned"
	}
	return "unknown"
}

// Status is what BeginBroadcast decided for a room batch. The values are
// the first element of begin_broadcast.lua's answer.
type Status int

const (
	// Acquired: the caller holds the room's lock (Begin.Lock); the ids
	// whose state is Claimed or Positioned have their positions in
	// Begin.Pos. It pushes them to Begin.Comets, then releases the lock
	// (ReleaseLock).
	Acquired Status = iota
	// InWindow: the room's cooldown window runs Begin.Wait longer; nothing
	// was claimed and no lock taken.
	InWindow
	// LockedElsewhere: another owner holds the room's lock; the window and
	// the claims were not touched.
	LockedElsewhere
	// NoneClaimable: no id could be claimed or has a position (Begin.States
	// says why for each: Processed or Busy); no lock taken.
	NoneClaimable
)

func (s Status) String() string {
	switch s {
	case Acquired:
		return "acquired"
	case InWindow:
		return "in_window"
	case LockedElsewhere:
		return "locked_elsewhere"
	case NoneClaimable:
		return "none_claimable"
	}
	return "unknown"
}

// BeginOptions are the durations of BeginBroadcast and the limits of the
// room's history.
type BeginOptions struct {
	// Window is the cooldown to open; 0 skips the cooldown check (a
	// shutdown drain delivers what it holds at once).
	Window time.Duration
	Owner  string
	// ClaimTTL is how long a claim lives: msg:processed:{room}:<msgId>,
	// which records the message's epoch and position, is the dedup key
	// (DefaultClaimTTL when 0).
	ClaimTTL time.Duration
	LockTTL  time.Duration
	// HistorySize is the most messages room:history:{room} keeps
	// (DefaultHistorySize when 0); HistoryTTL how long the room's timeline
	// lives after its last write (DefaultHistoryTTL when 0).
	HistorySize int
	HistoryTTL  time.Duration
	// Known is the head of the room's timeline as the caller last assigned
	// it (Begin.Head), zero when it knows none. A stored timeline of the
	// same epoch that is behind it lost writes, and a new epoch starts.
	Known Head
	// Replicas, when above 0, makes an Acquired call wait until that many
	// replicas of the room's master hold what it wrote (WAIT on the
	// script's connection, up to ReplicaTimeout). Fewer in time is an
	// error, with the lock set for AbortBroadcast like any failed call:
	// a failover to a replica then cannot lose positions the caller goes
	// on to push.
	Replicas       int
	ReplicaTimeout time.Duration
	// Encoded, when not nil, holds the JSON of each message of the batch
	// without its position, id first (danmaku.Envelope.MsgJSON), stored in
	// the history as it is; otherwise each message is encoded here.
	Encoded [][]byte
}

// Begin is the outcome of BeginBroadcast; Status says which fields are set.
type Begin struct {
	Status Status
	Lock   *Lock            // with Acquired
	Comets map[string]int64 // cometID -> viewers, with Acquired
	Wait   time.Duration    // with InWindow
	States []ClaimState     // one per message, with Acquired and NoneClaimable
	// Epoch is the room's timeline the positions belong to, with Acquired.
	Epoch string
	// Pos holds one position per message, with Acquired: consecutive, in
	// the batch's order, for the Claimed ones, the position it was given
	// before for a Positioned one, 0 for the others.
	Pos []int64
	// Last is the timeline's last position after the call, with Acquired.
	Last int64
	// Tombstoned is, for a del event (BeginEvent), how many elements of the
	// room's history became tombstones.
	Tombstoned int
	// Dels is, with Acquired, the number of message ids deleted in the
	// epoch so far (after this call for a del event); see Deletions. A
	// BeginEvent of a room without a timeline leaves it 0 with Epoch "".
	Dels int64
	// Sv is, with Acquired, the version of the room's settings
	// (danmaku.Batch.Sv).
	Sv int64
}

// Head is the timeline head after this batch: its epoch and its last
// position, whoever assigned it (zero without Acquired). The caller passes
// it back as BeginOptions.Known in the room's next BeginBroadcast.
func (b Begin) Head() Head {
	if b.Status != Acquired || b.Epoch == "" || b.Last == 0 {
		return Head{}
	}
	return Head{Epoch: b.Epoch, Last: b.Last}
}

// BeginBroadcast runs the guards of one room batch in a single atomic
// script: the lock must be free, the cooldown window is opened, the
// messages' ids are claimed, and only if at least one was claimed or has a
// position of the current epoch the lock is kept, room:comets:{room} is
// read, and the newly claimed messages get the next positions of the
// room's timeline and are appended to its history. A claim is final: it
// holds the message's epoch and position for ClaimTTL, so a message
// delivered again (a redelivery, a client's retry) gets its position back
// instead of a new one. One round trip for the cooldown, the claims, the
// lock, the route lookup and the history; it never opens a window, claims
// ids or assigns positions while another owner holds the lock. The ids of
// msgs must be distinct (job removes repeats before).
func (s *Store) BeginBroadcast(ctx context.Context, room string, msgs []danmaku.Message, o BeginOptions) (Begin, error) {
	var b Begin
	keys, args, err := beginArgs(room, msgs, &o)
	if err != nil {
		return b, err
	}
	token := newToken()
	args = append([]any{o.Window.Milliseconds(), o.Owner, o.ClaimTTL.Milliseconds(), token,
		o.LockTTL.Milliseconds(), o.HistorySize, o.HistoryTTL.Milliseconds(), newEpoch(),
		o.Known.Epoch, o.Known.Last}, args...)
	var (
		res  []any
		acks int64
	)
	if o.Replicas > 0 {
		res, acks, err = s.runReplicated(ctx, "begin broadcast", beginBroadcastScript, keys, args, o.Replicas, o.ReplicaTimeout)
	} else {
		res, err = beginBroadcastScript.Run(ctx, s.rdb, keys, args...).Slice()
	}
	if err != nil {
		// The script may still run (or have run) in Redis: the token lets
		// AbortBroadcast take the lock back.
		b.Lock = &Lock{Room: room, Token: token}
		return b, wrap("begin broadcast", err)
	}
	if len(res) != 9 {
		return b, danmaku.Errorf(danmaku.EINTERNAL, "", "begin broadcast returned %d values", len(res))
	}
	status, _ := res[0].(int64)
	if Status(status) == Acquired && acks < int64(o.Replicas) {
		b.Lock = &Lock{Room: room, Token: token}
		return b, danmaku.Errorf(danmaku.EUNAVAILABLE, "", "begin broadcast: %d of %d replicas acknowledged within %v", acks, o.Replicas, o.ReplicaTimeout)
	}
	b.Status = Status(status)
	states, _ := res[2].([]any)
	for _, v := range states {
		n, _ := v.(int64)
		b.States = append(b.States, ClaimState(n))
	}
	switch b.Status {
	case Acquired:
		b.Lock = &Lock{Room: room, Token: token}
		b.acquired(res)
	case InWindow:
		ms, _ := res[1].(int64)
		b.Wait = time.Duration(ms) * time.Millisecond
	case LockedElsewhere, NoneClaimable:
	default:
		return Begin{}, danmaku.Errorf(danmaku.EINTERNAL, "", "begin broadcast returned status %d", status)
	}
	return b, nil
}

// acquired reads the answer of a BeginBroadcast that took the lock.
func (b *Begin) acquired(res []any) {
	b.Comets = parseCounts(res[3])
	b.Epoch, _ = res[4].(string)
	pos, _ := res[5].([]any)
	b.Pos = make([]int64, len(b.States))
	for i := range min(len(pos), len(b.Pos)) {
		b.Pos[i], _ = pos[i].(int64)
	}
	b.Dels, _ = res[6].(int64)
	b.Last, _ = res[7].(int64)
	b.Sv, _ = res[8].(int64)
}

// beginArgs checks room, msgs and o, fills o's defaults, and returns the
// script's keys and the message JSON (without positions) in msgs' order.
func beginArgs(room string, msgs []danmaku.Message, o *BeginOptions) (keys []string, args []any, err error) {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	pk, err := processedKeys(room, ids)
	if err != nil {
		return nil, nil, err
	}
	if err := danmaku.CheckID("owner", o.Owner); err != nil {
		return nil, nil, err
	}
	if o.ClaimTTL == 0 {
		o.ClaimTTL = DefaultClaimTTL
	}
	if o.HistorySize == 0 {
		o.HistorySize = DefaultHistorySize
	}
	if o.HistoryTTL == 0 {
		o.HistoryTTL = DefaultHistoryTTL
	}
	if o.HistorySize < 0 || o.HistoryTTL < time.Millisecond {
		return nil, nil, danmaku.Errorf(danmaku.EINVALID, "history", "history size and TTL must be positive")
	}
	if o.Encoded != nil && len(o.Encoded) != len(msgs) {
		return nil, nil, danmaku.Errorf(danmaku.EINVALID, "encoded", "%d encoded messages for %d messages", len(o.Encoded), len(msgs))
	}
	args = make([]any, len(msgs))
	for i, m := range msgs {
		if o.Encoded != nil {
			args[i] = o.Encoded[i]
			continue
		}
		m.Pos = 0 // a stored element's position follows from its place
		js, err := json.Marshal(m)
		if err != nil {
			return nil, nil, danmaku.Errorf(danmaku.EINVALID, "msg", "encode message %s: %v", m.ID, err)
		}
		args[i] = js
	}
	keys = append([]string{lockKey(room), cooldownKey(room), roomCometsKey(room), timelineKey(room), historyKey(room), delsKey(room),
		roomStateKey(room)}, pk...)
	return keys, args, nil
}

// parseCounts turns an HGETALL reply of room:comets:{room} into cometID ->
// viewers, leaving out counts that are not positive.
func parseCounts(reply any) map[string]int64 {
	flat, _ := reply.([]any)
	out := make(map[string]int64, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		id, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		if n, _ := strconv.ParseInt(v, 10, 64); n > 0 {
			out[id] = n
		}
	}
	return out
}

// EndBroadcast marks ids delivered for ttl and releases l, in one round
// trip. A batch of messages passes no ids (its claims are final); an event
// passes its id. ErrNotHolder when the lock had already passed to somebody
// else (the marks are written all the same: the ids were delivered).
func (s *Store) EndBroadcast(ctx context.Context, l *Lock, ids []string, ttl time.Duration) error {
	keys, err := processedKeys(l.Room, ids)
	if err != nil {
		return err
	}
	keys = append([]string{lockKey(l.Room)}, keys...)
	n, err := endBroadcastScript.Run(ctx, s.rdb, keys, l.Token, ttl.Milliseconds()).Int64()
	if err != nil {
		return wrap("end broadcast", err)
	}
	if n == 0 {
		return ErrNotHolder
	}
	return nil
}

// AbortBroadcast takes back what BeginBroadcast calls that returned an
// error may have taken in room: a Redis that stalled runs a script after
// the caller gave up on it, and that script then holds the room's lock
// with a token nobody knows, and claims. When the lock holds one of tokens
// (Begin.Lock.Token of the failed calls) it is released together with
// owner's event claims on ids; otherwise nothing is touched. The claims of
// messages stay: they hold the positions the script gave them, in the
// history, and the retry pushes them at those positions. Call it once Redis
// answers again: a script still queued behind the stall runs before a
// command sent after an answer. One round trip; it returns whether the lock
// was released and the claims released with it.
func (s *Store) AbortBroadcast(ctx context.Context, room, owner string, tokens, ids []string) (bool, int, error) {
	keys, err := processedKeys(room, ids)
	if err != nil {
		return false, 0, err
	}
	if err := danmaku.CheckID("owner", owner); err != nil {
		return false, 0, err
	}
	if len(tokens) == 0 {
		return false, 0, nil
	}
	args := make([]any, 0, 1+len(tokens))
	args = append(args, owner)
	for _, t := range tokens {
		args = append(args, t)
	}
	n, err := abortBroadcastScript.Run(ctx, s.rdb, append([]string{lockKey(room)}, keys...), args...).Int()
	if err != nil {
		return false, 0, wrap("abort broadcast", err)
	}
	if n < 0 {
		return false, 0, nil
	}
	return true, n, nil
}

// processedKeys checks room and ids and returns the dedup key of each id.
func processedKeys(room string, ids []string) ([]string, error) {
	if err := danmaku.CheckID("room", room); err != nil {
		return nil, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		if err := danmaku.CheckID("msgId", id); err != nil {
			return nil, err
		}
		keys[i] = processedKey(room, id)
	}
	return keys, nil
}
