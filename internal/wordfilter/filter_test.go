package wordfilter

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/unitext"
)

func mustFilter(tb testing.TB, cfg Config) *Filter {
	tb.Helper()
	f, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

func writeList(tb testing.TB, dir, text string) string {
	tb.Helper()
	path := filepath.Join(dir, "words.txt")
	if err := os.WriteFile(path+".tmp", []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	// Rename, as an editor or a deploy would, so readers never see half a file.
	if err := os.Rename(path+".tmp", path); err != nil {
		tb.Fatal(err)
	}
	return path
}

func TestMatchAndMask(t *testing.T) {
	f := mustFilter(t, Config{Words: []string{
		"he", "she", "hers", "Bad Word", "σοφια", "привет", "kilo", "傻瓜", "💩", "straße",
	}})
	cases := []struct {
		in, word, masked string
	}{
		{"", "", ""},
		{"no match: 'h e', s.h.e", "", "no match: 'h e', s.h.e"},
		{"hello world", "he", "**llo world"},
		{"ushers", "she", "u*****"},
		{"HERS only", "he", "**** only"},
		{"a BAD WORD now", "Bad Word", "a ******** now"},
		{"where", "he", "w**re"},
		{"bad  word (two spaces)", "", "bad  word (two spaces)"},
		{"ΣΟΦΙΑ and σοφιας", "σοφια", "***** and *****ς"},
		{"Привет!", "привет", "******!"},
		{"\u212Ailo (Kelvin sign)", "kilo", "**** (Kelvin sign)"},
		{"你是傻瓜吗", "傻瓜", "你是**吗"},
		{"ok 💩💩 ok", "💩", "ok ** ok"},
		{"STRASSE", "", "STRASSE"},
		{"STRAẞE", "straße", "******"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			word, ok := f.Match(tc.in)
			if word != tc.word || ok != (tc.word != "") {
				t.Fatalf("Match = %q, %v, want %q", word, ok, tc.word)
			}
			masked, changed := f.Mask(tc.in)
			if masked != tc.masked || changed != (tc.word != "") {
				t.Fatalf("Mask = %q, %v, want %q", masked, changed, tc.masked)
			}
			if !changed && unsafe.StringData(masked) != unsafe.StringData(tc.in) {
				t.Fatal("clean text was copied")
			}
		})
	}
}

func TestApply(t *testing.T) {
	words := []string{"spoiler"}
	for _, tc := range []struct {
		mode, out, code string
	}{
		{"", "no SPOILER please", ""},
		{ModeOff, "no SPOILER please", ""},
		{ModeMask, "no ******* please", ""},
		{ModeReject, "no SPOILER please", danmaku.CodeBlocked},
	} {
		f := mustFilter(t, Config{Mode: tc.mode, Words: words})
		out, err := f.Apply("messages[2].content", "no SPOILER please")
		if out != tc.out || danmaku.ErrorCode(err) != tc.code {
			t.Errorf("mode %q: Apply = %q, %v", tc.mode, out, err)
		}
		if err != nil && (danmaku.ErrorField(err) != "messages[2].content" || strings.Contains(err.Error(), "spoiler")) {
			t.Errorf("mode %q: error %v must name the field and not the word", tc.mode, err)
		}
		if out, err := f.Apply("content", "fine"); out != "fine" || err != nil {
			t.Errorf("mode %q: clean text: %q, %v", tc.mode, out, err)
		}
	}
	var off *Filter
	if out, err := off.Apply("content", "spoiler"); out != "spoiler" || err != nil || off.Len() != 0 {
		t.Errorf("nil filter: %q, %v", out, err)
	}
}

func TestListFile(t *testing.T) {
	dir := t.TempDir()
	path := writeList(t, dir, "\uFEFF# blocked words\n\n  spam  \nEGGS\neggs\n# ham\nbad phrase\n")
	f := mustFilter(t, Config{Mode: ModeMask, File: path, Words: []string{"Spam", "extra"}})
	if f.Len() != 4 { // Spam, extra, EGGS, bad phrase
		t.Fatalf("Len = %d, want 4", f.Len())
	}
	if got, _ := f.Mask("spam, eggs, ham, a bad phrase, extra"); got != "****, ****, ham, a **********, *****" {
		t.Fatalf("Mask = %q", got)
	}

	for _, tc := range []struct {
		name, field, want string
		cfg               Config
	}{
		{"bad mode", "mode", "must be off, reject or mask", Config{Mode: "block"}},
		{"empty word", "words[1]", "empty entry", Config{Words: []string{"a", "  "}}},
		{"long word", "words[0]", "longer than", Config{Words: []string{strings.Repeat("x", MaxWordLen+1)}}},
		{"missing file", "file", "no such file", Config{File: filepath.Join(dir, "nope.txt")}},
		{"bad line", "file", "words.txt:2: not valid UTF-8", Config{File: writeList(t, t.TempDir(), "ok\nbad\xff\n")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Message, tc.want) {
				t.Fatalf("Validate = %v, want field %s saying %q", err, tc.field, tc.want)
			}
			if _, err := New(tc.cfg); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	path := writeList(t, dir, "alpha\n")
	f := mustFilter(t, Config{Mode: ModeReject, File: path})
	if _, ok := f.Match("beta"); ok {
		t.Fatal("beta blocked before it is listed")
	}
	writeList(t, dir, "beta\n")
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Match("alpha"); ok {
		t.Fatal("alpha still blocked after reload")
	}
	if w, ok := f.Match("BETA"); !ok || w != "beta" {
		t.Fatal("beta not blocked after reload")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := f.Reload(); err == nil {
		t.Fatal("Reload of a missing file succeeded")
	}
	if _, ok := f.Match("beta"); !ok {
		t.Fatal("failed reload dropped the list in use")
	}
}

// TestConcurrentReload swaps between two lists while readers check text:
// every answer must come from one whole list, never from a mix or a
// half-built automaton.
func TestConcurrentReload(t *testing.T) {
	dir := t.TempDir()
	listA, listB := "red\ngreen\n", "blue\nyellow\n"
	f := mustFilter(t, Config{Mode: ModeMask, File: writeList(t, dir, listA)})
	var stop atomic.Bool
	var wg sync.WaitGroup
	var checks atomic.Int64
	errs := make(chan string, 4)
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				got, _ := f.Mask("red green blue yellow")
				if got != "*** ***** blue yellow" && got != "red green **** ******" {
					errs <- got
					return
				}
				checks.Add(1)
			}
		})
	}
	for i := range 200 {
		writeList(t, dir, []string{listB, listA}[i%2])
		if err := f.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for got := range errs {
		t.Errorf("Mask during reload = %q, from no single list", got)
	}
	if checks.Load() == 0 {
		t.Fatal("no check ran during the reloads")
	}
}

// naiveMask is the reference: at every position, every word, compared by
// canonical folds.
// naiveMask is the reference: every occurrence of every word's matching
// form in the matching form of s, by brute force, masked over the
// characters of s it came from.
func naiveMask(words []string, s string) string {
	in, origin := unitext.Fold(s)
	out := []rune(s)
	for i := range in {
		for _, w := range words {
			wr, _ := unitext.Fold(w)
			if len(wr) == 0 || i+len(wr) > len(in) {
				continue
			}
			match := true
			for j, r := range wr {
				if fold(in[i+j]) != fold(r) {
					match = false
					break
				}
			}
			if match {
				for j := origin[i]; j < maskEnd(origin, i+len(wr)-1, len(out)); j++ {
					out[j] = '*'
				}
			}
		}
	}
	return string(out)
}

// Spellings that look like a blocked word, or hide it with invisible
// characters, match it; masking covers the characters they came from.
func TestBypassSpellings(t *testing.T) {
	f := mustFilter(t, Config{Mode: ModeMask, Words: []string{"badword", "café"}})
	cases := []struct{ name, text, masked string }{
		{"zero-width space", "a bad\u200bword!", "a ********!"},
		{"zero-width joiner and non-joiner", "bad\u200dwo\u200crd", "*********"},
		{"word joiner", "b\u2060adword", "********"},
		{"soft hyphen", "bad\u00adword", "********"},
		{"byte order mark", "bad\ufeffword", "********"},
		{"variation selector", "badw\ufe0ford", "********"},
		{"bidi override", "bad\u202eword", "********"},
		{"full width", "ｂａｄｗｏｒｄ", "*******"},
		{"math bold", "𝐛𝐚𝐝𝐰𝐨𝐫𝐝", "*******"},
		{"cyrillic look-alikes", "bаdwоrd", "*******"},
		{"greek look-alikes", "bαdwοrd", "*******"},
		{"capitals and look-alikes", "ВАDWОRD", "*******"},
		{"combining marks", "b\u0336a\u0336d\u0336word", "**********"},
		{"accent", "bádword", "*******"},
		{"decomposed accent in the list", "cafe\u0301 cafe", "***** ****"},
		{"clean", "bad words are not badly worded", "bad words are not badly worded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := f.Match(tc.text); ok != (tc.masked != tc.text) {
				t.Errorf("Match(%q) = %v", tc.text, ok)
			}
			if got, _ := f.Mask(tc.text); got != tc.masked {
				t.Errorf("Mask(%q) = %q, want %q", tc.text, got, tc.masked)
			}
		})
	}
	if _, err := New(Config{Words: []string{"\u200b\u00ad"}}); err == nil {
		t.Error("a word of invisible characters was accepted")
	}
}

func TestMaskMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abAB σΣς傻\u200bａаé\u0301")
	randText := func(n int) string {
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	}
	for range 300 {
		var words []string
		for range 1 + rng.IntN(6) {
			if w := strings.TrimSpace(randText(1 + rng.IntN(4))); checkWord(w) == "" {
				words = append(words, w)
			}
		}
		f := mustFilter(t, Config{Words: words})
		text := randText(rng.IntN(30))
		got, _ := f.Mask(text)
		if want := naiveMask(words, text); got != want {
			t.Fatalf("words %q, text %q: Mask = %q, want %q", words, text, got, want)
		}
		_, ok := f.Match(text)
		if ok != (got != text) {
			t.Fatalf("words %q, text %q: Match = %v but Mask = %q", words, text, ok, got)
		}
	}
}

func FuzzMask(f *testing.F) {
	f.Add("he,she,hers", "ushers and HIS")
	f.Add("σοφια,傻瓜", "ΣΟΦΙΑ 傻瓜")
	f.Add("bad,ﬁne", "b\u200bａd fine ｆｉｎｅ")
	f.Fuzz(func(t *testing.T, list, text string) {
		var words []string
		for _, w := range strings.Split(list, ",") {
			if checkWord(w) == "" {
				words = append(words, strings.TrimSpace(w))
			}
		}
		filter, err := New(Config{Words: words})
		if err != nil || !utf8.ValidString(text) {
			return
		}
		got, _ := filter.Mask(text)
		if want := naiveMask(words, text); got != want {
			t.Fatalf("words %q, text %q: Mask = %q, want %q", words, text, got, want)
		}
	})
}
