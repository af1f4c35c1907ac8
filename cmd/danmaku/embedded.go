package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/danmaku/danmaku/internal/devbroker"
)

// expiryTick is how often the embedded Redis ages its keys. miniredis does
// not expire keys by itself; a ticker advancing every TTL by the elapsed
// time costs O(keys with a TTL) per tick, independent of the command rate,
// and keeps the room cooldown (job.window) accurate to about this much.
const expiryTick = 10 * time.Millisecond

// embedded holds the in-memory Redis and Kafka started when no real ones
// are configured.
type embedded struct {
	redis *miniredis.Miniredis
	kafka *devbroker.Broker
	quit  chan struct{}
	wg    sync.WaitGroup
}

// startRedis starts miniredis on a free loopback port and returns its
// address. Every command and Lua feature route uses (EVALSHA with EVAL
// fallback, redis.call('TIME'), SET NX PX, PEXPIRE, PTTL, HINCRBY, hashes
// and sets) runs on it; keys expire through the ticker below.
func (e *embedded) startRedis() (string, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return "", fmt.Errorf("start embedded redis: %w", err)
	}
	e.redis = mr
	e.quit = make(chan struct{})
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t := time.NewTicker(expiryTick)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-e.quit:
				return
			case now := <-t.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return mr.Addr(), nil
}

// startKafka starts a single-node kfake cluster on a free loopback port.
// The job's consumer group may use a one-second session timeout against
// it, as tests do; topics are created by logic at start-up.
func (e *embedded) startKafka() (string, error) {
	b, err := devbroker.Start(devbroker.Options{})
	if err != nil {
		return "", err
	}
	e.kafka = b
	return b.Addr(), nil
}

// stop closes whatever was started. Safe to call when nothing was.
func (e *embedded) stop() {
	if e.quit != nil {
		close(e.quit)
		e.wg.Wait()
		e.quit = nil
	}
	if e.kafka != nil {
		e.kafka.Stop()
		e.kafka = nil
	}
	if e.redis != nil {
		e.redis.Close()
		e.redis = nil
	}
}
