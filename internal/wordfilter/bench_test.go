package wordfilter

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// benchWords returns n distinct words, half Latin (3-8 letters), half CJK
// (2-4 characters), like a real mixed list.
func benchWords(n int) []string {
	rng := rand.New(rand.NewPCG(7, 7))
	seen := map[string]bool{}
	var words []string
	for len(words) < n {
		var b strings.Builder
		if len(words)%2 == 0 {
			for range 3 + rng.IntN(6) {
				b.WriteRune('a' + rng.Int32N(26))
			}
		} else {
			for range 2 + rng.IntN(3) {
				b.WriteRune(0x4E00 + rng.Int32N(3000))
			}
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return words
}

// benchComments returns 100-rune comments: clean Latin (random letters, so
// the automaton leaves the root often; the first clean one of a fixed
// sequence), clean CJK, and the Latin one with a listed word in the middle.
func benchComments(f *Filter, words []string) (latin, cjk, dirty string) {
	rng := rand.New(rand.NewPCG(9, 9))
	for {
		var l strings.Builder
		for i := range 100 {
			if i%6 == 5 {
				l.WriteByte(' ')
			} else {
				l.WriteRune('a' + rng.Int32N(26))
			}
		}
		if _, ok := f.Match(l.String()); !ok {
			latin = l.String()
			break
		}
	}
	var c strings.Builder
	for range 100 {
		c.WriteRune(0x4E00 + rng.Int32N(6000)) // half of them in the list's range
	}
	cjk = c.String()
	r := []rune(latin)
	dirty = string(r[:50]) + strings.ToUpper(words[0]) + string(r[50+utf8.RuneCountInString(words[0]):])
	return latin, cjk, dirty
}

func BenchmarkFilter(b *testing.B) {
	words := benchWords(1000)
	f := mustFilter(b, Config{Words: words})
	latin, cjk, dirty := benchComments(f, words)
	if _, ok := f.Match(dirty); !ok {
		b.Fatal("dirty comment does not match")
	}
	if _, ok := f.Match(latin + cjk); ok {
		b.Fatal("clean comments match")
	}
	for _, bc := range []struct {
		name string
		fn   func()
	}{
		{"Match/clean-latin", func() { f.Match(latin) }},
		{"Match/clean-cjk", func() { f.Match(cjk) }},
		{"Match/dirty", func() { f.Match(dirty) }},
		{"Mask/clean-latin", func() { f.Mask(latin) }},
		{"Mask/dirty", func() { f.Mask(dirty) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.fn()
			}
		})
	}
	b.Run("Compile", func(b *testing.B) {
		for b.Loop() {
			compile(words)
		}
	})
}
