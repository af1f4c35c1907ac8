package config

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type section struct {
	Addr    string        `yaml:"addr"`
	Window  time.Duration `yaml:"window"`
	Budget  int           `yaml:"budget"`
	Enabled bool          `yaml:"enabled"`
	Origins []string      `yaml:"allowed_origins"`
}

func (s *section) Validate() error {
	if s.Window < 10*time.Millisecond {
		return Invalid("window", "must be at least 10ms, got %v", s.Window)
	}
	return nil
}

type testConfig struct {
	Log   Log     `yaml:"log"`
	Redis Redis   `yaml:"redis"`
	Job   section `yaml:"job"`
}

func defaults() testConfig {
	return testConfig{Log: DefaultLog(), Redis: DefaultRedis(), Job: section{Addr: ":1", Window: time.Second, Budget: 10}}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLayers(t *testing.T) {
	file := writeFile(t, "job:\n  window: 200ms\n  budget: 5\n  allowed_origins: [a, b]\nredis:\n  addrs: [r1:1, r2:2]\n")
	t.Run("defaults only", func(t *testing.T) {
		c := defaults()
		if err := Load(&c, Options{}); err != nil {
			t.Fatal(err)
		}
		if c.Job.Window != time.Second || c.Redis.PoolSize != 64 {
			t.Fatalf("defaults changed: %+v", c)
		}
	})
	t.Run("file, env, flag", func(t *testing.T) {
		c := defaults()
		err := Load(&c, Options{
			Args:    []string{"-config", file, "-job.budget=7", "-job.enabled"},
			Environ: []string{"DANMAKU_JOB_BUDGET=6", "DANMAKU_JOB_ADDR=:9", "OTHER=1"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if c.Job.Window != 200*time.Millisecond {
			t.Errorf("window from file = %v", c.Job.Window)
		}
		if c.Job.Addr != ":9" {
			t.Errorf("addr from env = %q", c.Job.Addr)
		}
		if c.Job.Budget != 7 {
			t.Errorf("budget: flag must beat env and file, got %d", c.Job.Budget)
		}
		if !c.Job.Enabled {
			t.Error("bool flag without value not applied")
		}
		if len(c.Redis.Addrs) != 2 || c.Job.Origins[1] != "b" {
			t.Errorf("lists from file: %v %v", c.Redis.Addrs, c.Job.Origins)
		}
		if c.Log.Level != "info" {
			t.Errorf("untouched default lost: %q", c.Log.Level)
		}
	})
	t.Run("env list", func(t *testing.T) {
		c := defaults()
		if err := Load(&c, Options{Environ: []string{"DANMAKU_REDIS_ADDRS=x:1, y:2"}}); err != nil {
			t.Fatal(err)
		}
		if len(c.Redis.Addrs) != 2 || c.Redis.Addrs[1] != "y:2" {
			t.Fatalf("addrs = %q", c.Redis.Addrs)
		}
	})
}

func TestErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name  string
		opts  Options
		field string
	}{
		{"validate", Options{Args: []string{"-job.window=5ms"}}, "job.window"},
		{"shared section", Options{Environ: []string{"DANMAKU_LOG_LEVEL=loud"}}, "log.level"},
		{"bad duration env", Options{Environ: []string{"DANMAKU_JOB_WINDOW=soon"}}, "job.window"},
		{"bad int flag", Options{Args: []string{"-job.budget=many"}}, "job.budget"},
		{"negative pool", Options{Args: []string{"-redis.pool_size=0"}}, "redis.pool_size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults()
			err := Load(&c, tc.opts)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("err = %v, want a FieldError for %s", err, tc.field)
			}
		})
	}
	t.Run("unknown key in file", func(t *testing.T) {
		c := defaults()
		err := Load(&c, Options{Args: []string{"-config", writeFile(t, "job:\n  windw: 1s\n")}})
		if err == nil {
			t.Fatal("a misspelt key was accepted")
		}
	})
	t.Run("missing file", func(t *testing.T) {
		c := defaults()
		if err := Load(&c, Options{Args: []string{"-config", "/nonexistent.yaml"}}); err == nil {
			t.Fatal("missing file accepted")
		}
	})
	t.Run("help", func(t *testing.T) {
		c := defaults()
		if err := Load(&c, Options{Args: []string{"-help"}, Output: io.Discard}); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("help: %v", err)
		}
	})
}

func TestKeys(t *testing.T) {
	c := defaults()
	keys := Keys(&c)
	found := false
	for _, k := range keys {
		if k[0] == "job.window" && k[1] == "DANMAKU_JOB_WINDOW" && k[2] == "1s" {
			found = true
		}
	}
	if !found {
		t.Fatalf("job.window missing from %v", keys)
	}
}

// An embedded struct's keys are listed at the embedding struct's level.
func TestKnobsOfEmbeddedStruct(t *testing.T) {
	type Inner struct {
		Job struct {
			Window int `yaml:"window"`
		} `yaml:"job"`
	}
	var v struct {
		Inner `yaml:",inline"`
		Page  struct {
			Base string `yaml:"base"`
		} `yaml:"page"`
	}
	var keys []string
	for _, k := range Knobs(&v) {
		keys = append(keys, k.Key+" "+k.Env)
	}
	want := []string{"job.window DANMAKU_JOB_WINDOW", "page.base DANMAKU_PAGE_BASE"}
	if strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Fatalf("Knobs = %q, want %q", keys, want)
	}
}

// A misspelt variable is named with the closest known one; variables of
// other roles' sections pass silently.
func TestUnknownEnvWarns(t *testing.T) {
	var out bytes.Buffer
	c := defaults()
	err := Load(&c, Options{Output: &out, Environ: []string{
		"DANMAKU_JOB_BUDGT=4", "DANMAKU_COMET_LISTEN=:1", "DANMAKU_JOB_BUDGET=5", "PATH=/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "config: warning: unknown variable DANMAKU_JOB_BUDGT is ignored (did you mean DANMAKU_JOB_BUDGET?)\n"
	if out.String() != want {
		t.Fatalf("warnings %q, want %q", out.String(), want)
	}
}

func TestUnknownFlagSuggests(t *testing.T) {
	c := defaults()
	err := Load(&c, Options{Args: []string{"-job.budgett=3"}})
	if err == nil || !strings.Contains(err.Error(), "unknown flag -job.budgett (did you mean -job.budget?)") {
		t.Fatalf("err = %v", err)
	}
}

// -help prints each knob's description from its help tag.
func TestHelpPrintsDescriptions(t *testing.T) {
	var out bytes.Buffer
	c := defaults()
	if err := Load(&c, Options{Name: "x", Args: []string{"-help"}, Output: &out}); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, want := range []string{
		"-redis.pool_size int\n    \tconnections per node (env DANMAKU_REDIS_POOL_SIZE, default \"64\")",
		"-log.level string\n    \tdebug, info, warn, error",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-help lacks %q:\n%s", want, out.String())
		}
	}
}

// Parse fills without validating; Load validates too.
func TestParseDoesNotValidate(t *testing.T) {
	c := defaults()
	if err := Parse(&c, Options{Args: []string{"-job.window=1ms"}}); err != nil {
		t.Fatalf("Parse validated: %v", err)
	}
	if err := Validate(&c); err == nil {
		t.Fatal("Validate accepted a 1ms window")
	}
}
