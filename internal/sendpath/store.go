package sendpath

import (
	"context"
	"time"

	"github.com/danmaku/danmaku"

	"github.com/danmaku/danmaku/route"
)

// Store is what the send path does in Redis: the batched check of bans,
// mutes and rate limits, a room's high-priority bucket, its settings and
// the check of its modes. route.Store implements it.
type Store interface {
	// NewAdmitter starts the batched send check (bans, mutes, rate limits).
	NewAdmitter(o route.AdmitOptions) *route.Admitter
	// TakeHigh and GiveBackHigh are a room's high-priority bucket.
	TakeHigh(ctx context.Context, room string, n int, b route.Bucket) (route.Verdict, error)
	GiveBackHigh(ctx context.Context, room string, n int, b route.Bucket) error
	ReadRoom(ctx context.Context, room string) (route.Room, error)
	// GlobalWords reads the edited global blocked words after a change.
	GlobalWords(ctx context.Context, known int64) (route.WordList, bool, error)
	CheckPace(ctx context.Context, p route.Pace) (route.PaceVerdict, error)
	// AddReview puts comments in a room's review queue and returns the id
	// each has there.
	AddReview(ctx context.Context, room string, items []danmaku.ReviewItem, ttl time.Duration, max int) ([]string, bool, error)
	// SetSendRules and SendRules store and read logic's rules (Rules).
	SetSendRules(ctx context.Context, rules []byte, ttl time.Duration) error
	SendRules(ctx context.Context) ([]byte, error)
}

var _ Store = (*route.Store)(nil)
