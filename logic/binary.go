package logic

import (
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
)

// BinaryConfig is the whole configuration of the logic binary (cmd/logic):
// the logic section and the shared sections it reads. It lives here, not in
// the binary, so that `danmaku config check` validates a file exactly as
// the binary does at start.
type BinaryConfig struct {
	Log   config.Log   `yaml:"log"`
	Redis config.Redis `yaml:"redis"`
	Kafka config.Kafka `yaml:"kafka"`
	Auth  auth.Section `yaml:"auth"`
	Logic Config       `yaml:"logic"`
}

// DefaultBinaryConfig returns the defaults of every section.
func DefaultBinaryConfig() BinaryConfig {
	return BinaryConfig{
		Log:   config.DefaultLog(),
		Redis: config.DefaultRedis(),
		Kafka: config.DefaultKafka(),
		Logic: DefaultConfig(),
	}
}

// Validate checks what the binary needs beyond its sections' own rules:
// Redis and Kafka addresses and, with logic.auth jwt, the auth section.
// (logic.admin_secret is checked by its section: no placeholder, 16 bytes
// or more.)
func (c *BinaryConfig) Validate() error {
	if err := config.RequireRedis(c.Redis); err != nil {
		return err
	}
	if err := config.RequireKafka(c.Kafka); err != nil {
		return err
	}
	if c.Logic.Auth == config.AuthJWT {
		return c.Auth.Require()
	}
	return nil
}
