package loadtest

import (
	"context"
	"time"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/route"
)

// historyCheckRooms bounds the rooms whose history the end-of-run check
// reads (the first ones of the layout).
const historyCheckRooms = 100

// repeatedIDs reads the Redis history of rooms (at most historyCheckRooms)
// and counts the message ids it holds at more than one position. A message
// accepted once has one position in its room's timeline; an id at two
// positions is shown twice to a viewer that resumes between them, whatever
// the comets filter. It returns the extra positions found.
func repeatedIDs(ctx context.Context, addrs string, rooms []string) (int, error) {
	rdb := route.Dial(config.Redis{Addrs: splitAddrs(addrs), DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	defer rdb.Close()
	st := route.New(rdb)
	extra := 0
	for _, room := range rooms[:min(len(rooms), historyCheckRooms)] {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		h, err := st.History(rctx, room, 0, 1<<20)
		cancel()
		if err != nil {
			return extra, err
		}
		seen := make(map[string]struct{}, len(h.Msgs))
		for _, m := range h.Msgs {
			if m.Deleted {
				continue
			}
			if _, dup := seen[m.ID]; dup {
				extra++
			}
			seen[m.ID] = struct{}{}
		}
	}
	return extra, nil
}
