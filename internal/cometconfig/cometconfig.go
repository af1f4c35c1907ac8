// Package cometconfig is the whole configuration of the comet binary
// (cmd/comet): the comet section, the demo page's and the shared sections
// it reads. It is a package of its own, not in the binary, so that
// `danmaku config check` validates a file exactly as the binary does at
// start; and not in package comet, which must not link the page.
package cometconfig

import (
	"github.com/danmaku/danmaku/comet"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/sendpath"
	"github.com/danmaku/danmaku/web"
)

// Config is the configuration of the comet binary.
type Config struct {
	Log   config.Log   `yaml:"log"`
	Redis config.Redis `yaml:"redis"`
	Auth  auth.Section `yaml:"auth"`
	Comet comet.Config `yaml:"comet"`
	Page  web.Config   `yaml:"page"`
	// Kafka and Send serve comet.socket_send: the room topic the viewers'
	// sends go to, and the send path's settings (logic's keys of it).
	Kafka config.Kafka    `yaml:"kafka"`
	Send  sendpath.Config `yaml:"send"`
}

// Default returns the defaults of every section.
func Default() Config {
	c := Config{Log: config.DefaultLog(), Redis: config.DefaultRedis(), Comet: comet.DefaultConfig(),
		Kafka: config.DefaultKafka(), Send: sendpath.DefaultConfig()}
	// Small per-connection Redis buffers: the pool is a fixed cost the
	// comet pays next to thousands of idle viewers.
	c.Redis.BufferSize = 4 << 10
	return c
}

// Validate checks what the binary needs beyond its sections' own rules: a
// Redis address, a push secret of the deployment's own (no placeholder, 16
// bytes or more) and, with comet.auth jwt or keys named, the auth section.
func (c *Config) Validate() error {
	if err := config.RequireRedis(c.Redis); err != nil {
		return err
	}
	if err := config.CheckSecret("comet.secret", c.Comet.Secret); err != nil {
		return err
	}
	if c.Comet.SocketSend {
		if err := config.RequireKafka(c.Kafka); err != nil {
			return err
		}
	}
	if c.Comet.Auth == config.AuthJWT || c.HasKeys() {
		return c.Auth.Require()
	}
	return nil
}

// HasKeys reports whether the auth section names keys: with comet.auth off
// they let a viewer prove its uid with a token (to receive user notices).
func (c *Config) HasKeys() bool {
	return c.Auth.HMACSecret != "" || len(c.Auth.PublicKeys) > 0
}
