package wordfilter

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/unitext"
)

// MaxWordLen is the longest entry accepted, in characters.
const MaxWordLen = 256

// Config configures a Filter.
type Config struct {
	// Mode is off (or empty), reject or mask.
	Mode string `yaml:"mode" help:"off, reject (400 content_blocked) or mask (each character of a blocked word becomes *)"`
	// File is a word list, one word or phrase per line; blank lines and
	// lines starting with # are skipped. Reload reads it again.
	File string `yaml:"file" help:"word list file, one word or phrase per line (# comments); reloaded on SIGHUP"`
	// Words are blocked in addition to the file's.
	Words []string `yaml:"words" help:"blocked words in addition to the file's"`
}

// Validate checks the mode and every entry, reading the file, so that a bad
// list stops the process at start. Errors are config field errors naming
// the field (mode, file, words[i]).
func (c *Config) Validate() error {
	if err := c.check(); err != nil {
		return err
	}
	_, err := c.words()
	return err
}

// check validates everything but the file.
func (c *Config) check() error {
	switch c.Mode {
	case "", ModeOff, ModeReject, ModeMask:
	default:
		return config.Invalid("mode", "must be off, reject or mask, not %q", c.Mode)
	}
	for i, w := range c.Words {
		if msg := checkWord(w); msg != "" {
			return config.Invalid(fmt.Sprintf("words[%d]", i), "%s", msg)
		}
	}
	return nil
}

// words returns the merged list: the configured words, then the file's,
// trimmed, without duplicates (same matching form, ignoring case).
func (c *Config) words() ([]string, error) {
	list := make([]string, 0, len(c.Words))
	for _, w := range c.Words {
		list = append(list, strings.TrimSpace(w))
	}
	if c.File != "" {
		fileWords, err := readList(c.File)
		if err != nil {
			return nil, config.Invalid("file", "%v", err)
		}
		list = append(list, fileWords...)
	}
	seen := make(map[string]bool, len(list))
	out := list[:0]
	for _, w := range list {
		key := foldString(unitext.FoldString(w))
		if !seen[key] {
			seen[key] = true
			out = append(out, w)
		}
	}
	return out, nil
}

// readList reads a word list file.
func readList(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimPrefix(b, []byte("\uFEFF")) // a byte order mark some editors write
	var words []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if msg := checkWord(line); msg != "" {
			return nil, fmt.Errorf("%s:%d: %s", path, n, msg)
		}
		words = append(words, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return words, nil
}

// checkWord returns what is wrong with a list entry, or "".
func checkWord(w string) string {
	w = strings.TrimSpace(w)
	switch {
	case w == "":
		return "empty entry"
	case utf8.ValidString(w) && unitext.FoldString(w) == "":
		return "no visible characters"
	case !utf8.ValidString(w):
		return "not valid UTF-8"
	case utf8.RuneCountInString(w) > MaxWordLen:
		return fmt.Sprintf("longer than %d characters", MaxWordLen)
	}
	return ""
}

// foldString maps every rune of s to its canonical case fold.
func foldString(s string) string {
	return strings.Map(fold, s)
}

// CheckWord returns what is wrong with w as a list entry (empty, no
// visible characters, not valid UTF-8, longer than MaxWordLen), or "".
func CheckWord(w string) string { return checkWord(w) }
