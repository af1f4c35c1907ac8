package route

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// SetSendRules stores logic's rules of the send path (an encoded
// sendpath.Rules) for the comets that take sends over their sockets,
// for ttl: each write renews it, and the rules of a service whose logics
// are all gone leave Redis by themselves.
func (s *Store) SetSendRules(ctx context.Context, rules []byte, ttl time.Duration) error {
	return wrap("set send rules", s.rdb.Set(ctx, sendRulesKey, rules, ttl).Err())
}

// SendRules returns the rules SetSendRules stored; nil when there are none.
func (s *Store) SendRules(ctx context.Context) ([]byte, error) {
	b, err := s.rdb.Get(ctx, sendRulesKey).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return b, wrap("get send rules", err)
}
