// Package unitext prepares user text for checks that invisible or
// look-alike characters must not defeat: blocked-word matching, blank
// checks and bidirectional controls in names.
//
// Fold maps text to its matching form, one character at a time:
//   - compatibility decomposition (NFKD, golang.org/x/text/unicode/norm):
//     full-width and other compatibility forms become their plain letters
//     ("ｂａｄ" is "bad"), ligatures their letters, accented letters their
//     base letter and accent;
//   - the script-independent combining diacritics (U+0300-036F, 1AB0-1AFF,
//     1DC0-1DFF, 20D0-20FF, FE20-FE2F) are dropped, so "b̷a̷d", "bád" and
//     "bad" match alike; marks that are letters of their script (kana voicing,
//     Indic and Thai vowel signs) are kept, as they tell words apart;
//   - default-ignorable code points are dropped: zero-width space and
//     joiners, soft hyphen, word joiner, byte order mark, bidi controls,
//     variation selectors, tag characters, Hangul fillers;
//   - the look-alikes of the confusables table (confusables.go: Cyrillic and
//     Greek letters drawn like Latin ones, dotless i) become the Latin letter.
//
// Case is left as it is: the word filter compares case-insensitively.
// Hangul syllables are not decomposed; both the list and the text keep them.
package unitext

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Fold returns the matching form of s as runes, and for each of them the
// index (in runes of s) of the character it came from, so a match in the
// folded text can be mapped back to s. ASCII text is its own form.
func Fold(s string) (folded []rune, origin []int32) {
	folded = make([]rune, 0, len(s))
	origin = make([]int32, 0, len(s))
	idx := int32(0)
	for i := 0; i < len(s); idx++ {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r < utf8.RuneSelf {
			folded, origin = append(folded, r), append(origin, idx)
			i += n
			continue
		}
		if d := norm.NFKD.PropertiesString(s[i:]).Decomposition(); d != nil {
			for _, dr := range string(d) {
				if keep(dr) {
					folded, origin = append(folded, lookAlike(dr)), append(origin, idx)
				}
			}
		} else if keep(r) {
			folded, origin = append(folded, lookAlike(r)), append(origin, idx)
		}
		i += n
	}
	return folded, origin
}

// FoldString is Fold as a string.
func FoldString(s string) string {
	f, _ := Fold(s)
	return string(f)
}

// keep reports whether r stays in the matching form.
func keep(r rune) bool { return !Ignorable(r) && !diacritic(r) }

// diacritic reports whether r is a script-independent combining diacritic.
func diacritic(r rune) bool {
	return r >= 0x0300 && r <= 0x036F || r >= 0x1AB0 && r <= 0x1AFF || r >= 0x1DC0 && r <= 0x1DFF ||
		r >= 0x20D0 && r <= 0x20FF || r >= 0xFE20 && r <= 0xFE2F
}

// Ignorable reports whether r is a default-ignorable code point (Unicode's
// Default_Ignorable_Code_Point: drawn as nothing when not supported).
func Ignorable(r rune) bool {
	if r < 0xAD {
		return false
	}
	switch {
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), unicode.Is(unicode.Variation_Selector, r):
		return true
	case !unicode.Is(unicode.Cf, r), unicode.Is(unicode.White_Space, r):
		return false
	}
	// Format characters are ignorable, except those that are drawn:
	// prepended concatenation marks and the interlinear annotation and
	// Egyptian hieroglyph format controls.
	switch {
	case r >= 0x0600 && r <= 0x0605, r == 0x06DD, r == 0x070F, r == 0x0890, r == 0x0891, r == 0x08E2,
		r == 0x110BD, r == 0x110CD, r >= 0xFFF9 && r <= 0xFFFB, r >= 0x13430 && r <= 0x1345F:
		return false
	}
	return true
}

// Blank reports whether s shows nothing: every character is white space,
// default-ignorable, a combining mark with nothing to combine with, or the
// blank braille pattern U+2800 (drawn as an empty cell).
func Blank(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) && !Ignorable(r) && !unicode.In(r, unicode.Mn, unicode.Me) && r != 0x2800 {
			return false
		}
	}
	return true
}

// BidiControl returns the first bidirectional formatting character of s
// (LRM, RLM, ALM, the embeddings, overrides and isolates U+202A-202E and
// U+2066-2069): in a name, such a character reorders what follows it, so
// "\u202Enimda" shows as "admin".
func BidiControl(s string) (rune, bool) {
	for _, r := range s {
		switch {
		case r == 0x200E, r == 0x200F, r == 0x061C, r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
			return r, true
		}
	}
	return 0, false
}

// Plain returns the form of s that tells two comments apart only by what
// a reader would call their words: its matching form (Fold) in lower case,
// with only letters, marks and digits kept ("Hello!!", "h e l l o" and
// "ＨＥＬＬＯ" are all "hello"). Text without any letter or digit (only
// punctuation or emoji) keeps its symbols, without spaces, so "!!!" and
// "???" stay apart.
func Plain(s string) string {
	folded, _ := Fold(s)
	out := make([]rune, 0, len(folded))
	for _, r := range folded {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) {
			out = append(out, unicode.ToLower(r))
		}
	}
	if len(out) > 0 {
		return string(out)
	}
	for _, r := range folded {
		if !unicode.IsSpace(r) {
			out = append(out, r)
		}
	}
	return string(out)
}
