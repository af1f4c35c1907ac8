package config

import "testing"

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
