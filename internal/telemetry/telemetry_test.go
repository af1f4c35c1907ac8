package telemetry

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"

	"github.com/danmaku/danmaku/internal/config"
)

// The console format writes colour codes only to a terminal.
func TestConsoleColourOnlyOnTerminal(t *testing.T) {
	c := config.DefaultLog()
	c.Format = "console"
	for _, colour := range []bool{false, true} {
		var buf bytes.Buffer
		log, err := newLogger(c, zapcore.AddSync(&buf), colour)
		if err != nil {
			t.Fatal(err)
		}
		log.Warn("hello", zapcore.Field{Key: "k", Type: zapcore.StringType, String: "v"})
		log.Sync()
		out := buf.String()
		if !strings.Contains(out, "WARN") || !strings.Contains(out, "hello") {
			t.Fatalf("colour %v: %q", colour, out)
		}
		if got := strings.Contains(out, "\x1b["); got != colour {
			t.Errorf("colour %v: escape codes present = %v in %q", colour, got, out)
		}
	}
	// A pipe or file is not a terminal.
	if colourTerminal(nil) {
		t.Error("nil file taken for a terminal")
	}
}

func TestJSONFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(config.DefaultLog(), zapcore.AddSync(&buf), true)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("x")
	if !strings.HasPrefix(buf.String(), `{"level":"info"`) {
		t.Fatalf("json: %q", buf.String())
	}
}
