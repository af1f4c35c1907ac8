package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/danmaku/danmaku/archive"
	"github.com/danmaku/danmaku/comet"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/job"
	"github.com/danmaku/danmaku/logic"
	"github.com/danmaku/danmaku/web"
)

// configTableHeader starts the configuration table of docs/config.md.
const configTableHeader = "| key | environment variable | default (role binaries) | all-in-one | meaning |\n|---|---|---|---|---|\n"

// configTable renders docs/config.md's table of every knob from the
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
		Archive: archive.DefaultConfig(),
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
	b.WriteString(configTableHeader)
	for _, k := range config.Knobs(&roles) {
		other := ""
		if a := aioKnobs[k.Key]; a.Default != k.Default {
			other = cell(a.Default)
		}
		b.WriteString("| `" + k.Key + "` | `" + k.Env + "` | " + cell(k.Default) + " | " + other + " | " + k.Help + " |\n")
	}
	return b.String()
}

// The configuration table of docs/config.md is generated from the help
// tags and defaults; UPDATE_DOCS=1 rewrites it.
func TestConfigDocTable(t *testing.T) {
	const path = "../../docs/config.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, configTableHeader)
	if start < 0 {
		t.Fatal("docs/config.md has no configuration table")
	}
	end := start + strings.Index(doc[start:], "\n\n") + 1
	if end <= start { // the table ends the file
		end = len(doc)
	}
	want := configTable()
	if doc[start:end] == want {
		return
	}
	if os.Getenv("UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(doc[:start]+want+doc[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/config.md's configuration table differs from the help tags and defaults; run UPDATE_DOCS=1 go test -run TestConfigDocTable ./cmd/danmaku/\nwant:\n%s", want)
}

// Every knob has a one-line description.
func TestEveryKnobDescribed(t *testing.T) {
	for _, line := range strings.Split(strings.TrimSpace(configTable()), "\n")[2:] {
		if strings.HasSuffix(line, "|  |") {
			t.Errorf("no help tag: %s", line)
		}
	}
}

// The README, the guides and the shipped configuration files quote one
// minimum length for the shared secrets (comet.secret, job.push_secret,
// logic.admin_secret): config.MinSecretLen bytes. A line about a secret
// that is not the JWT key (auth.hmac_secret, HS256: 32 bytes) may name no
// other length, in bytes or characters.
func TestDocsQuoteOneSecretLength(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	yamls, _ := filepath.Glob("../../configs/*.yaml")
	files = append(append(files, "../../README.md"), yamls...)
	// A length said of a secret: in the same sentence, shortly after it.
	length := regexp.MustCompile(`(?i)secret[^.]{0,160}?\b(\d+)\+? ?(bytes|characters|chars)\b`)
	quoted := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, unit := range textUnits(string(b)) {
			low := strings.ToLower(unit)
			if !strings.Contains(low, "secret") || strings.Contains(low, "hmac") || strings.Contains(low, "hs256") {
				continue
			}
			for _, m := range length.FindAllStringSubmatch(unit, -1) {
				quoted++
				if m[1] != strconv.Itoa(config.MinSecretLen) || strings.ToLower(m[2]) != "bytes" {
					t.Errorf("%s quotes %s %s for a secret, want %d bytes: %s", f, m[1], m[2], config.MinSecretLen, m[0])
				}
			}
		}
	}
	if quoted < 3 {
		t.Fatalf("found %d quoted secret lengths; the docs no longer say it?", quoted)
	}
}

// textUnits splits a document into what one statement spans: a paragraph
// (lines up to a blank one, joined), or a single line of a table or a
// YAML file.
func textUnits(doc string) []string {
	var units []string
	for _, para := range strings.Split(doc, "\n\n") {
		lines := strings.Split(strings.TrimSpace(para), "\n")
		if strings.HasPrefix(lines[0], "|") || strings.Contains(para, ": ") && strings.Contains(para, "#") {
			units = append(units, lines...)
			continue
		}
		units = append(units, strings.Join(lines, " "))
	}
	return units
}
