package logic

import (
	"context"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/route"
)

// Store is what logic does in Redis: the send check (through an Admitter),
// online counts and history reads, and the admin API's mutes and bans.
// route.Store implements it; the keys and scripts behind each call are
// route's.
type Store interface {
	Ping(ctx context.Context) error
	// NewAdmitter starts the batched send check (bans, mutes, rate limits).
	NewAdmitter(o route.AdmitOptions) *route.Admitter
	// The send path's rules, written for the comets (sendpath.Rules).
	SetSendRules(ctx context.Context, rules []byte, ttl time.Duration) error
	SendRules(ctx context.Context) ([]byte, error)
	Online(ctx context.Context, room string) (int64, error)
	// TakeHigh and GiveBackHigh are a room's high-priority bucket.
	TakeHigh(ctx context.Context, room string, n int, b route.Bucket) (route.Verdict, error)
	GiveBackHigh(ctx context.Context, room string, n int, b route.Bucket) error
	History(ctx context.Context, room string, since int64, limit int) (route.History, error)

	// Moderation: the flags Admit and the registry read.
	Mute(ctx context.Context, user, room string, d time.Duration) error
	Unmute(ctx context.Context, user, room string) (bool, error)
	Ban(ctx context.Context, user, room string, d time.Duration) error
	Unban(ctx context.Context, user, room string) (bool, error)
	// MarkDeleted keeps deleted ids from ever getting a position (and
	// takes them off the list of held comments, HeldList).
	MarkDeleted(ctx context.Context, room string, ids []string, ttl time.Duration) error
	HeldList(ctx context.Context, room string, limit int) ([]danmaku.HeldItem, error)
	// The review queues of rooms with review on.
	AddReview(ctx context.Context, room string, items []danmaku.ReviewItem, ttl time.Duration, max int) ([]string, bool, error)
	ReviewQueue(ctx context.Context, room string, ttl time.Duration, limit int) ([]danmaku.ReviewItem, error)
	ClaimReview(ctx context.Context, room string, ids []string, ttl, lease time.Duration) ([]danmaku.ReviewItem, error)
	ReleaseReview(ctx context.Context, room string, ids []string, ttl time.Duration) error
	RemoveReview(ctx context.Context, room string, ids []string, ttl time.Duration) (int, error)
	// Sanctions lists the active mutes and bans of a room ("": all).
	Sanctions(ctx context.Context, room string) ([]route.Sanction, error)

	// Room settings and the send check of their modes.
	RoomState(ctx context.Context, room string) (danmaku.RoomState, error)
	ReadRoom(ctx context.Context, room string) (route.Room, error)
	// The edited blocked-word lists (the global one for room "").
	GlobalWords(ctx context.Context, known int64) (route.WordList, bool, error)
	AddWords(ctx context.Context, room, mode string, words []string, max int) (int, bool, error)
	RemoveWords(ctx context.Context, room string, words []string) (int, error)
	Hide(ctx context.Context, user, room string, until time.Time) error
	Unhide(ctx context.Context, user, room string) (bool, error)
	SetPin(ctx context.Context, room string, p danmaku.Pin) (danmaku.Pin, error)
	Unpin(ctx context.Context, room, id string) (int64, error)
	SetRoomState(ctx context.Context, room string, p route.StatePatch) (danmaku.RoomState, error)
	CheckPace(ctx context.Context, p route.Pace) (route.PaceVerdict, error)

	// The rooms the moderator console lists.
	ActiveRooms(ctx context.Context, max int) ([]string, error)
	RoomLoads(ctx context.Context, rooms []string) ([]route.RoomLoad, error)

	// The audit log of admin actions, newest first.
	AppendAudit(ctx context.Context, entry []byte, keep int) error
	Audit(ctx context.Context, n int) ([][]byte, error)
}

var _ Store = (*route.Store)(nil)
