package danmaku

import "encoding/json"

// CanaryEnvelopeVersion is the version written into canary records. A
// reader older than it counts a canary as an invalid record and skips it,
// so canaries can be turned on before every job knows them.
const CanaryEnvelopeVersion = 4

// OpCanary is the op of the push that carries a canary to a comet. No
// viewer ever receives a frame of this op.
const OpCanary = "canary"

// Canary is a delivery probe: logic writes one to every partition of the
// room topic every logic.canary_interval, job delivers it like a broadcast
// notice (claimed in Redis, pushed to every comet with a lease, in a
// CanaryPush) and the comets record its age. It never reaches a viewer or
// a room's history.
type Canary struct {
	// ID is unique per canary: job claims it like a notice id.
	ID string `json:"id"`
	// Partition is the partition the canary was written to, of Partitions
	// the topic had then.
	Partition  int `json:"partition"`
	Partitions int `json:"partitions"`
	// TS is when logic wrote it, in Unix milliseconds.
	TS int64 `json:"ts"`
}

// CanaryPush is what job pushes to a comet: the newest canary of each
// partition it consumed since its last push.
type CanaryPush struct {
	Op       string   `json:"op"` // OpCanary
	Canaries []Canary `json:"canaries"`
}

// check reports whether every canary of p is valid.
func (p *CanaryPush) check() error {
	for i := range p.Canaries {
		if err := p.Canaries[i].Check(); err != nil {
			return err
		}
	}
	return nil
}

// CanaryKeyPrefix starts the Kafka record key of canaries. Room ids cannot
// hold ':', so no room shares a canary's key.
const CanaryKeyPrefix = "canary:"

// MarshalCanary encodes a canary as a Kafka record value.
func MarshalCanary(c Canary) ([]byte, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		V      int     `json:"v"`
		Canary *Canary `json:"canary"`
	}{CanaryEnvelopeVersion, &c})
}

// Check reports whether c is a valid canary; the error is EINVALID and
// names the field.
func (c *Canary) Check() error {
	if err := CheckID("canary.id", c.ID); err != nil {
		return err
	}
	switch {
	case c.Partitions < 1:
		return Errorf(EINVALID, "canary.partitions", "must be at least 1")
	case c.Partition < 0 || c.Partition >= c.Partitions:
		return Errorf(EINVALID, "canary.partition", "must be between 0 and partitions-1")
	case c.TS <= 0:
		return Errorf(EINVALID, "canary.ts", "must be positive")
	}
	return nil
}
