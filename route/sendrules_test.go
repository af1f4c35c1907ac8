package route

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/danmaku/danmaku/internal/testkit/redisserver"
)

// The send rules are kept for the TTL of their last write and are gone
// after it: a service whose logics all stopped leaves no key without a TTL.
func TestSendRulesExpire(t *testing.T) {
	redisserver.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		s, ctx := New(rdb), context.Background()
		t.Cleanup(func() { rdb.Del(ctx, sendRulesKey) })
		if err := s.SetSendRules(ctx, []byte(`{"maxMessages":5}`), time.Minute); err != nil {
			t.Fatal(err)
		}
		if ttl := rdb.PTTL(ctx, sendRulesKey).Val(); ttl <= 50*time.Second || ttl > time.Minute {
			t.Fatalf("send rules TTL %v after a write with a minute", ttl)
		}
		if b, err := s.SendRules(ctx); err != nil || string(b) != `{"maxMessages":5}` {
			t.Fatalf("SendRules = %s, %v", b, err)
		}
		if err := s.SetSendRules(ctx, []byte(`{}`), 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if b, err := s.SendRules(ctx); err != nil || b != nil {
			t.Fatalf("SendRules after the TTL = %s, %v; want none", b, err)
		}
	})
}
