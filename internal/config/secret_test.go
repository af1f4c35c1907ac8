package config_test

import (
	"testing"

	"github.com/danmaku/danmaku/comet"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/job"
)

// One length rule for every shared secret, with one message, whether the
// section checks it (the all-in-one binary) or a role binary does.
func TestSecretLengthOneRule(t *testing.T) {
	const short = "0123456789abcde" // 15 bytes
	cc := comet.DefaultConfig()
	cc.Secret = short
	jc := job.DefaultConfig()
	jc.PushSecret = short
	for _, tc := range []struct {
		key string
		err error
	}{
		{"comet.secret", config.Validate(&struct {
			Comet comet.Config `yaml:"comet"`
		}{cc})},
		{"job.push_secret", config.Validate(&struct {
			Job job.Config `yaml:"job"`
		}{jc})},
		{"comet.secret", config.CheckSecret("comet.secret", short)},
		{"job.push_secret", config.CheckSecret("job.push_secret", short)},
	} {
		want := "config: " + tc.key + ": must be at least 16 bytes, got 15 (openssl rand -hex 16)"
		if tc.err == nil || tc.err.Error() != want {
			t.Errorf("%v, want %s", tc.err, want)
		}
	}
	if err := config.CheckSecret("comet.secret", short+"f"); err != nil {
		t.Errorf("16 bytes refused: %v", err)
	}
}
