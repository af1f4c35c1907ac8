package main

import (
	"os"
	"strings"
	"testing"

	"github.com/danmaku/danmaku/comet"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/job"
	"github.com/danmaku/danmaku/logic"
	"github.com/danmaku/danmaku/web"
)

// readmeTableHeader starts the README's configuration table.
const readmeTableHeader = "| key | environment variable | default (role binaries) | all-in-one | meaning |\n|---|---|---|---|---|\n"

// configTable renders the README's table of every knob from the
// configuration structs: key, variable, the role binaries' default, the
// all-in-one binary's where it differs, and the help tag.
func configTable() string {
	type all struct {
		Config `yaml:",inline"`
		Page   web.Config `yaml:"page"`
	}
	roles := all{Config: Config{
		Log: config.DefaultLog(), Redis: config.DefaultRedis(), Kafka: config.DefaultKafka(),
		Logic: logic.DefaultConfig(), Job: job.DefaultConfig(), Comet: comet.DefaultConfig(),
	}}
	aio := all{Config: DefaultConfig()}
	aioKnobs := map[string]config.Knob{}
	for _, k := range config.Knobs(&aio) {
		aioKnobs[k.Key] = k
	}
	cell := func(v string) string {
		if v == "" {
			return "(empty)"
		}
		return "`" + v + "`"
	}
	var b strings.Builder
	b.WriteString(readmeTableHeader)
	for _, k := range config.Knobs(&roles) {
		other := ""
		if a := aioKnobs[k.Key]; a.Default != k.Default {
			other = cell(a.Default)
		}
		b.WriteString("| `" + k.Key + "` | `" + k.Env + "` | " + cell(k.Default) + " | " + other + " | " + k.Help + " |\n")
	}
	return b.String()
}

// The README's configuration table is generated from the help tags and
// defaults; UPDATE_README=1 rewrites it.
func TestReadmeConfigTable(t *testing.T) {
	const path = "../../README.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, readmeTableHeader)
	if start < 0 {
		t.Fatal("README has no configuration table")
	}
	end := start + strings.Index(readme[start:], "\n\n") + 1
	want := configTable()
	if readme[start:end] == want {
		return
	}
	if os.Getenv("UPDATE_README") == "1" {
		if err := os.WriteFile(path, []byte(readme[:start]+want+readme[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README's configuration table differs from the help tags and defaults; run UPDATE_README=1 go test -run TestReadmeConfigTable ./cmd/danmaku/\nwant:\n%s", want)
}

// Every knob has a one-line description.
func TestEveryKnobDescribed(t *testing.T) {
	for _, line := range strings.Split(strings.TrimSpace(configTable()), "\n")[2:] {
		if strings.HasSuffix(line, "|  |") {
			t.Errorf("no help tag: %s", line)
		}
	}
}
