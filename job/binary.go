package job

import "github.com/danmaku/danmaku/internal/config"

// BinaryConfig is the whole configuration of the job binary (cmd/job): the
// job section and the shared sections it reads. It lives here, not in the
// binary, so that `danmaku config check` validates a file exactly as the
// binary does at start.
type BinaryConfig struct {
	Log   config.Log   `yaml:"log"`
	Redis config.Redis `yaml:"redis"`
	Kafka config.Kafka `yaml:"kafka"`
	Job   Config       `yaml:"job"`
}

// DefaultBinaryConfig returns the defaults of every section.
func DefaultBinaryConfig() BinaryConfig {
	return BinaryConfig{Log: config.DefaultLog(), Redis: config.DefaultRedis(), Kafka: config.DefaultKafka(), Job: DefaultConfig()}
}

// Validate checks what the binary needs beyond its sections' own rules.
// The push secret must be the deployment's own: the shipped placeholder
// (or any change-me value) and secrets under 16 bytes are refused.
func (c *BinaryConfig) Validate() error {
	if err := config.RequireRedis(c.Redis); err != nil {
		return err
	}
	if err := config.RequireKafka(c.Kafka); err != nil {
		return err
	}
	return config.CheckSecret("job.push_secret", c.Job.PushSecret)
}
