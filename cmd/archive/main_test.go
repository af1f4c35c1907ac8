package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku/archive"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/testkit"
	"github.com/danmaku/danmaku/internal/testkit/kafkabroker"
	"github.com/danmaku/danmaku/internal/testkit/pgserver"
	"github.com/danmaku/danmaku/vodstore"
)

func TestMain(m *testing.M) { os.Exit(pgserver.Run(m)) }

func TestConfigFileLoads(t *testing.T) {
	c := archive.DefaultBinaryConfig()
	if err := config.Load(&c, config.Options{Args: []string{"-config", "../../configs/archive.yaml"}}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, archive.DefaultBinaryConfig()) {
		t.Fatalf("configs/archive.yaml does not match the defaults:\n%+v\n%+v", c, archive.DefaultBinaryConfig())
	}
}

// A bad setting stops the binary at start with the key named.
func TestBadConfigRefused(t *testing.T) {
	for field, set := range map[string]func(*Config){
		"archive.dsn":          func(c *Config) { c.Archive.DSN = "mysql://x" },
		"archive.auto_silence": func(c *Config) { c.Archive.AutoSilence = time.Millisecond },
		"archive.batch_size":   func(c *Config) { c.Archive.BatchSize = 0 },
	} {
		m := NewMain()
		set(&m.Config)
		err := m.Run(context.Background())
		m.Close()
		var fe *config.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("Run = %v, want an error naming %s", err, field)
		}
	}
}

// migrate creates the schema and stops; run serves /healthz, /readyz once
// it consumes, and /metrics with the archive's series, and stops on Close.
func TestMigrateThenRun(t *testing.T) {
	dsn := pgserver.FreshDSN(t)
	m := NewMain()
	m.MigrateOnly = true
	m.Config.Archive.DSN = dsn
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("migrate did not finish")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := vodstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Streams(context.Background(), "r", 1); err != nil {
		t.Fatalf("schema not there after migrate: %v", err)
	}

	b := kafkabroker.Start(t, kafkabroker.MinSessionTimeout(time.Second))
	m = NewMain()
	m.Config.Log.Level = "warn"
	m.Config.Kafka.Brokers, m.Config.Kafka.Partitions = b.Brokers(), 2
	m.Config.Archive.DSN = "sqlite:" + filepath.Join(t.TempDir(), "a.db")
	m.Config.Archive.MetricsAddr = "127.0.0.1:0"
	m.Config.Archive.SessionTimeout, m.Config.Archive.HeartbeatInterval = time.Second, 200*time.Millisecond
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + m.MetricsAddr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz %d", code)
	}
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		if code, body := get("/readyz"); code != http.StatusOK {
			return errors.New(body)
		}
		return nil
	})
	if _, body := get("/metrics"); !strings.Contains(body, "danmaku_archive_lag_messages") || !strings.Contains(body, `danmaku_archive_records_total{kind="comment"}`) {
		t.Fatalf("/metrics lacks the archive's series:\n%s", body)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
