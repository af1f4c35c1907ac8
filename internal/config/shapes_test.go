package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// An exported but empty variable (`export A=$(cmd) B=$A` on one line
// leaves B empty) counts as unset, with a warning naming it: it does not
// clear the file's value.
func TestEmptyEnvCountsAsUnset(t *testing.T) {
	var out bytes.Buffer
	c := defaults()
	err := Load(&c, Options{Output: &out,
		Args:    []string{"-config", writeFile(t, "job:\n  addr: \":7\"\n")},
		Environ: []string{"DANMAKU_JOB_ADDR=", "DANMAKU_REDIS_ADDRS="}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Job.Addr != ":7" || len(c.Redis.Addrs) != 1 {
		t.Fatalf("empty variables overrode values: job.addr %q, redis.addrs %q", c.Job.Addr, c.Redis.Addrs)
	}
	for _, v := range []string{"DANMAKU_JOB_ADDR", "DANMAKU_REDIS_ADDRS"} {
		if !strings.Contains(out.String(), "warning: "+v+" is set but empty") {
			t.Errorf("no warning naming %s: %q", v, out.String())
		}
	}
}

// A value of the wrong kind from a variable or a flag names the key, the
// source and the kind wanted, without Go's parser messages.
func TestEnvAndFlagTypeErrors(t *testing.T) {
	type cfg struct {
		Job struct {
			Rate   float64       `yaml:"rate"`
			Budget int8          `yaml:"budget"`
			Window time.Duration `yaml:"window"`
			On     bool          `yaml:"on"`
		} `yaml:"job"`
	}
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Environ: []string{"DANMAKU_JOB_RATE=fast"}}, `config: job.rate: env DANMAKU_JOB_RATE="fast": want a number`},
		{Options{Args: []string{"-job.rate=fast"}}, `config: job.rate: flag -job.rate="fast": want a number`},
		{Options{Args: []string{"-job.budget=300"}}, `config: job.budget: flag -job.budget="300": want an integer, this one is out of range`},
		{Options{Environ: []string{"DANMAKU_JOB_WINDOW=soon"}}, `config: job.window: env DANMAKU_JOB_WINDOW="soon": want a duration (200ms, 1s, 2m)`},
		{Options{Args: []string{"-job.on=yes please"}}, `config: job.on: flag -job.on="yes please": want true or false`},
	} {
		var c cfg
		err := Parse(&c, tc.opts)
		var fe *FieldError
		if !errors.As(err, &fe) || err.Error() != tc.want {
			t.Errorf("%v: %v\nwant %s", tc.opts, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "strconv") || strings.Contains(err.Error(), "time:")) {
			t.Errorf("Go internals in %q", err)
		}
	}
}

// A YAML list may be written as flow, block or the "a,b" of variables and
// flags.
func TestYAMLListShapes(t *testing.T) {
	for _, body := range []string{
		"redis:\n  addrs: [r1:1, r2:2]\n",
		"redis:\n  addrs:\n    - r1:1\n    - r2:2\n",
		"redis:\n  addrs: r1:1,r2:2\n",
		"redis:\n  addrs: \"r1:1, r2:2\"\n",
	} {
		c := defaults()
		if err := Load(&c, Options{Args: []string{"-config", writeFile(t, body)}}); err != nil {
			t.Errorf("%q: %v", body, err)
			continue
		}
		if strings.Join(c.Redis.Addrs, " ") != "r1:1 r2:2" {
			t.Errorf("%q: addrs %q", body, c.Redis.Addrs)
		}
	}
}

// A syntax error is reported at the line that has it, not where the
// enclosing block began.
func TestYAMLSyntaxErrorLine(t *testing.T) {
	for _, tc := range []struct {
		body string
		line string
	}{
		{"job:\n  addr: \":1\"\n budget: 3\n", "line 3:"},
		{"log:\n  level: info\njob:\n    addr: \":1\"\n  budget: 3\n", "line 5:"},
		{"job:\n  addr: \":1\"\n   budget: 3\n", "line 3:"},
		{"log:\n  level: info\njob:\n  addr: \":1\"\n\tbudget: 3\n", "line 5:"},
	} {
		c := defaults()
		err := Load(&c, Options{Args: []string{"-config", writeFile(t, tc.body)}})
		if err == nil || !strings.Contains(err.Error(), tc.line) {
			t.Errorf("%q: %v, want %s", tc.body, err, tc.line)
		}
	}
}
