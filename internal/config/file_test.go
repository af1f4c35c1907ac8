package config

import (
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
