package route

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku"
)

// Defaults of the room history that BeginBroadcast writes: job.Config's
// history_size and history_ttl.
const (
	DefaultHistorySize = 1000
	DefaultHistoryTTL  = 10 * time.Minute
)

var historyScript = script("history")

// Head is where a room's timeline stands: its epoch and the last position
// assigned in it. The zero Head is a room without a timeline.
type Head struct {
	Epoch string
	Last  int64
	// Dels is the number of message ids deleted in the epoch, as Heads
	// reads it (a caller's Known leaves it 0).
	Dels int64
}

// History is a range of a room's timeline as History reads it.
type History struct {
	// Epoch and Last are the room's head when it was read; "" and 0 for a
	// room without a timeline.
	Epoch string
	Last  int64
	// First is the oldest position the history still holds (Last+1 when it
	// holds none). A reader that wants positions before First cannot have
	// them: they were trimmed or expired.
	First int64
	// Msgs are the messages read, oldest first, with Pos set; consecutive
	// positions. A deleted message is there as its tombstone (ID, Pos and
	// Deleted only); Visible leaves tombstones out.
	Msgs []danmaku.Message
	// Dels is the number of message ids deleted in the epoch (see
	// Deletions).
	Dels int64
}

// Visible returns the messages of h that were not deleted. It returns
// h.Msgs itself when none was.
func (h History) Visible() []danmaku.Message {
	for i, m := range h.Msgs {
		if !m.Deleted {
			continue
		}
		out := append(make([]danmaku.Message, 0, len(h.Msgs)-1), h.Msgs[:i]...)
		for _, m := range h.Msgs[i+1:] {
			if !m.Deleted {
				out = append(out, m)
			}
		}
		return out
	}
	return h.Msgs
}

// newEpoch returns a fresh epoch id for a room's timeline.
func newEpoch() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// History reads up to limit messages of room's history in one script call,
// together with the timeline's head: with since >= 0 the oldest messages
// after position since (from First when since is older than the kept
// range), with since < 0 the newest limit messages. since is a position of
// the current epoch; a caller holding a position of another epoch compares
// Epoch and starts over.
func (s *Store) History(ctx context.Context, room string, since int64, limit int) (History, error) {
	var h History
	if err := danmaku.CheckID("room", room); err != nil {
		return h, err
	}
	if limit < 1 {
		return h, danmaku.Errorf(danmaku.EINVALID, "limit", "limit must be at least 1, got %d", limit)
	}
	res, err := historyScript.Run(ctx, s.rdb, []string{timelineKey(room), historyKey(room)}, since, limit).Slice()
	if err != nil {
		return h, wrap("history", err)
	}
	if len(res) != 6 {
		return h, danmaku.Errorf(danmaku.EINTERNAL, "", "history returned %d values", len(res))
	}
	h.Dels, _ = res[5].(int64)
	h.Epoch, _ = res[0].(string)
	h.Last, _ = res[1].(int64)
	h.First, _ = res[2].(int64)
	from, _ := res[3].(int64)
	items, _ := res[4].([]any)
	h.Msgs = make([]danmaku.Message, len(items))
	for i, it := range items {
		js, _ := it.(string)
		if err := json.Unmarshal([]byte(js), &h.Msgs[i]); err != nil {
			return History{}, danmaku.Errorf(danmaku.EINTERNAL, "", "history of %s at %d: %v", room, from+int64(i), err)
		}
		h.Msgs[i].Pos = from + int64(i)
	}
	return h, nil
}

// Heads reads the head of every room's timeline in one pipeline, one
// HMGET per room (on a cluster the client sends each shard its part). A
// room without a timeline has the zero Head.
func (s *Store) Heads(ctx context.Context, rooms []string) (map[string]Head, error) {
	for _, r := range rooms {
		if err := danmaku.CheckID("room", r); err != nil {
			return nil, err
		}
	}
	out := make(map[string]Head, len(rooms))
	if len(rooms) == 0 {
		return out, nil
	}
	cmds, err := s.execPipe(ctx, "heads", func(p redis.Pipeliner) {
		for _, r := range rooms {
			p.HMGet(ctx, timelineKey(r), "epoch", "seq", "dels")
		}
	})
	if err != nil {
		return nil, err
	}
	for i, c := range cmds {
		vals := c.(*redis.SliceCmd).Val()
		var h Head
		if len(vals) == 3 {
			h.Epoch, _ = vals[0].(string)
			seq, _ := vals[1].(string)
			h.Last, _ = strconv.ParseInt(seq, 10, 64)
			dels, _ := vals[2].(string)
			h.Dels, _ = strconv.ParseInt(dels, 10, 64)
		}
		if h.Epoch == "" {
			h = Head{}
		}
		out[rooms[i]] = h
	}
	return out, nil
}
