package redisserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ServerEnv names the environment variable that chooses the server the
// tests start: a binary name looked up in PATH, or a path. Unset, it is
// redis-server; `make valkey` sets it to valkey-server. The chosen binary
// missing fails every test that needs a server, as a missing redis-server
// does: a run meant for Valkey never passes on Redis, or on nothing.
const ServerEnv = "DANMAKU_TEST_REDIS_SERVER"

// serverBinary returns the path of the server binary the tests start.
func serverBinary() (string, error) {
	name := os.Getenv(ServerEnv)
	if name == "" {
		name = "redis-server"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		hint := "Debian: apt-get install redis-server"
		if strings.Contains(name, "valkey") {
			hint = "Debian: apt-get install -t bookworm-backports valkey-server"
		}
		return "", fmt.Errorf("%s not found (%s=%q; %s): %w", name, ServerEnv, os.Getenv(ServerEnv), hint, err)
	}
	return bin, nil
}

// checkFlavour checks that the server on addr is the kind its binary's name
// says: Valkey answers INFO with valkey_version (and, for compatibility,
// redis_version too), Redis without it.
func checkFlavour(addr, bin string) error {
	info, err := serverInfo(addr)
	if err != nil {
		return err
	}
	wantValkey := strings.Contains(filepath.Base(bin), "valkey")
	if isValkey := strings.Contains(info, "valkey_version:"); isValkey != wantValkey {
		return fmt.Errorf("%s on %s answers INFO as %s", bin, addr, Flavour(info))
	}
	return nil
}

// serverInfo returns INFO server of the server on addr.
func serverInfo(addr string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Info(ctx, "server").Result()
}

// Flavour names the server and its version from INFO server: "valkey
// 8.0.1" or "redis 7.0.15".
func Flavour(info string) string {
	field := func(k string) string {
		for _, l := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), k+":"); ok {
				return v
			}
		}
		return ""
	}
	if v := field("valkey_version"); v != "" {
		return "valkey " + v
	}
	return "redis " + field("redis_version")
}
