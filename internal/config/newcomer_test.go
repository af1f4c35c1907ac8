package config

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// File errors name the key (dotted path) and the line, in YAML terms.
func TestFileErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"job:\n  budget: many\n", "line 2: job.budget: want an integer, got \"many\""},
		{"job:\n  window: 5\n", "line 2: job.window: want a duration (200ms, 1s, 2m), got \"5\""},
		{"redis:\n  addrs: {a: 1}\n", "line 2: redis.addrs: want a list ([a, b], a,b, or one \"- a\" per line), got a mapping"},
		{"job:\n  windw: 1s\n", "line 2: job.windw: unknown key (did you mean job.window?)"},
		{"jobb:\n  window: 1s\n", "line 1: jobb: unknown section (did you mean job?)"},
		{"job: 5\n", "line 1: job must be a mapping of keys"},
	} {
		c := defaults()
		err := Load(&c, Options{Args: []string{"-config", writeFile(t, tc.file)}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.file, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "config.section") {
			t.Errorf("%q: Go type name in %v", tc.file, err)
		}
	}
}

// Sections of the service's other binaries are ignored, so one file can
// serve every role; the binary's own sections still apply.
func TestOtherRolesSectionsIgnored(t *testing.T) {
	c := defaults()
	f := writeFile(t, "comet:\n  listen: \":1\"\nkafka:\n  brokers: [k:1]\njob:\n  budget: 3\n")
	if err := Load(&c, Options{Args: []string{"-config", f}}); err != nil {
		t.Fatal(err)
	}
	if c.Job.Budget != 3 {
		t.Fatalf("own section not applied: %+v", c.Job)
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

// Every knob of the shared sections has a description.
func TestSharedSectionsDescribed(t *testing.T) {
	c := struct {
		Log   Log   `yaml:"log"`
		Redis Redis `yaml:"redis"`
		Kafka Kafka `yaml:"kafka"`
	}{DefaultLog(), DefaultRedis(), DefaultKafka()}
	for _, k := range Knobs(&c) {
		if k.Help == "" {
			t.Errorf("%s has no help tag", k.Key)
		}
	}
}
