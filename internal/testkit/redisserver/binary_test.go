package redisserver

import (
	"os"
	"strings"
	"testing"
)

// TestServerBinary: the server started is the one ServerEnv names (make
// valkey runs this package with valkey-server), and a named binary that
// is missing is an error naming it, never a silent fall back to Redis.
func TestServerBinary(t *testing.T) {
	s := Standalone(t)
	info, err := serverInfo(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	got := Flavour(info)
	t.Logf("%s=%q: the tests run on %s", ServerEnv, os.Getenv(ServerEnv), got)
	if strings.Contains(os.Getenv(ServerEnv), "valkey") != strings.HasPrefix(got, "valkey ") {
		t.Errorf("%s=%q, yet the server is %s", ServerEnv, os.Getenv(ServerEnv), got)
	}

	t.Setenv(ServerEnv, "no-such-valkey-server")
	if srv, err := StartServer(); err == nil {
		srv.Stop()
		t.Fatal("a missing server binary started a server")
	} else if !strings.Contains(err.Error(), "no-such-valkey-server not found") || !strings.Contains(err.Error(), "bookworm-backports") {
		t.Errorf("error %q does not name the binary and how to install it", err)
	}
}

func TestFlavour(t *testing.T) {
	for info, want := range map[string]string{
		"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n":                     "redis 7.0.15",
		"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n": "valkey 8.0.1",
	} {
		if got := Flavour(info); got != want {
			t.Errorf("Flavour(%q) = %q, want %q", info, got, want)
		}
	}
}
