package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
)

// A port in use fails Run at once, and Close after it returns: the
// process exits instead of hanging.
func TestPortInUseFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	m := NewMain()
	m.Config.Log.Level = "error"
	m.Config.Logic.Listen = ln.Addr().String()
	start := time.Now()
	err = m.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "logic.listen") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Run = %v, want a listen error naming logic.listen", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close after a failed Run hangs")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("failing took %v", d)
	}
}

// Logic starts with Redis down (it may come up later) but says so at warn.
func TestRedisDownIsLogged(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	core, logs := observer.New(zap.WarnLevel)
	m := NewMain()
	m.Logger = zap.New(core)
	m.Config.Logic.Listen = "127.0.0.1:0"
	m.Config.Redis.Addrs = []string{dead}
	m.Config.Redis.DialTimeout = 300 * time.Millisecond
	m.Config.Kafka.Brokers = kafkabroker.Start(t).Brokers()
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	found := logs.FilterMessageSnippet("redis does not answer").All()
	if len(found) != 1 || found[0].Level != zap.WarnLevel || !strings.Contains(found[0].ContextMap()["error"].(string), "refused") {
		t.Fatalf("warn lines %v", logs.All())
	}
}

// The configuration is validated once, by Run, and errors name section
// and key.
func TestConfigErrorsNameTheSection(t *testing.T) {
	m := NewMain()
	m.Config.Logic.RateBurst = 1
	err := m.Run(context.Background())
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "logic.rate_burst" || !strings.HasPrefix(err.Error(), "config: logic.rate_burst: ") {
		t.Fatalf("Run = %v", err)
	}
	m.Close()
	m = NewMain()
	m.Config.Kafka.Brokers = nil
	if err := m.Run(context.Background()); err == nil || err.Error() != "config: kafka.brokers: must not be empty" {
		t.Fatalf("Run = %v", err)
	}
	m.Close()
}
