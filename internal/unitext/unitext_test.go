package unitext

import "testing"

func TestFold(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"ascii", "Bad word", "Bad word"},
		{"zero-width space", "b\u200Bad", "bad"},
		{"zero-width joiners", "b\u200Da\u200Cd\u2060", "bad"},
		{"soft hyphen", "ba\u00ADd", "bad"},
		{"byte order mark", "\uFEFFbad", "bad"},
		{"variation selector", "ba\uFE0Fd", "bad"},
		{"tag characters", "b\U000E0061ad", "bad"},
		{"bidi controls", "\u202Ebad\u202C\u2066", "bad"},
		{"full width", "ｂａｄ", "bad"},
		{"ligature", "ﬁne", "fine"},
		{"math letters", "𝐛𝐚𝐝", "bad"},
		{"cyrillic look-alikes", "bаd саt", "bad cat"},
		{"greek look-alikes", "Βαd", "Bad"},
		{"accents", "bád", "bad"},
		{"combining marks", "b\u0336a\u0336d\u0336\u20DD", "bad"},
		{"kana voicing kept", "ばか", "は\u3099か"},
		{"chinese kept", "你好", "你好"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := FoldString(tc.in); got != tc.want {
				t.Errorf("FoldString(%q) = %q (%U), want %q", tc.in, got, []rune(got), tc.want)
			}
		})
	}
	f, origin := Fold("x\u200Bｙé")
	if string(f) != "xye" || len(origin) != 3 || origin[0] != 0 || origin[1] != 2 || origin[2] != 3 {
		t.Fatalf("Fold: %q %v", string(f), origin)
	}
}

func TestBlank(t *testing.T) {
	for _, s := range []string{"", " ", "\u200B", "\u200B\u200C\u200D\u2060\uFEFF", "\u00AD", "\u3164", "\uFFA0",
		"\u115F\u1160", "\u2800", "\u0301\u0301", " \u3000\u2003 ", "\U000E0020"} {
		if !Blank(s) {
			t.Errorf("Blank(%q) = false", s)
		}
	}
	for _, s := range []string{"a", "\u200Ba", "。", "🙂", "\u0600"} {
		if Blank(s) {
			t.Errorf("Blank(%q) = true", s)
		}
	}
}

func TestBidiControl(t *testing.T) {
	for _, s := range []string{"\u202Enimda", "a\u202Ab", "x\u2066y\u2069", "\u200Fa", "\u200E", "\u061C"} {
		if _, ok := BidiControl(s); !ok {
			t.Errorf("BidiControl(%q) found none", s)
		}
	}
	for _, s := range []string{"admin", "مرحبا", "שלום", "名前"} {
		if r, ok := BidiControl(s); ok {
			t.Errorf("BidiControl(%q) = %U", s, r)
		}
	}
}

// Plain makes comments that differ in case, width, accents, look-alike
// letters, invisible characters, spaces or punctuation equal, and keeps
// different words and different symbol-only comments apart.
func TestPlain(t *testing.T) {
	same := [][]string{
		{"hello", "Hello!!", "h e l l o", "ＨＥＬＬＯ", "hé\u200bllo", "hеllо"},
		{"gg 2", "GG2", "g.g. 2!"},
		{"!!!", "! ! !"},
	}
	for _, group := range same {
		for _, s := range group {
			if Plain(s) != Plain(group[0]) {
				t.Errorf("Plain(%q) = %q, Plain(%q) = %q: want equal", s, Plain(s), group[0], Plain(group[0]))
			}
		}
	}
	for _, pair := range [][2]string{{"hello", "help"}, {"!!!", "???"}, {"gg", "gg2"}, {"你好", "您好"}} {
		if Plain(pair[0]) == Plain(pair[1]) {
			t.Errorf("Plain(%q) = Plain(%q) = %q: want different", pair[0], pair[1], Plain(pair[0]))
		}
	}
}
