package unitext

// lookAlikes maps letters drawn like a Latin letter in common fonts to that
// letter: the Cyrillic and Greek letters whose shapes match a Latin one
// (in both cases), and a few Latin variants that NFKD leaves alone. It is a
// short table for matching blocked words, not the full Unicode confusables
// list; a letter missing here matches only itself and its case variants.
var lookAlikes = map[rune]rune{
	// Cyrillic, lower case.
	'а': 'a', 'в': 'b', 'е': 'e', 'һ': 'h', 'і': 'i', 'ј': 'j', 'к': 'k', 'ӏ': 'l',
	'о': 'o', 'р': 'p', 'ԛ': 'q', 'ѕ': 's', 'с': 'c', 'у': 'y', 'ү': 'y', 'ԝ': 'w',
	'х': 'x', 'ԁ': 'd', 'ɡ': 'g',
	// Cyrillic, upper case.
	'А': 'A', 'В': 'B', 'Е': 'E', 'Һ': 'H', 'І': 'I', 'Ј': 'J', 'К': 'K', 'Ӏ': 'l',
	'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P', 'Ԛ': 'Q', 'Ѕ': 'S', 'С': 'C', 'Т': 'T',
	'У': 'Y', 'Ү': 'Y', 'Ԝ': 'W', 'Х': 'X',
	// Greek, lower case.
	'α': 'a', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'υ': 'u', 'χ': 'x',
	// Greek, upper case.
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M',
	'Ν': 'N', 'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
	// Latin variants.
	'ı': 'i', 'ɑ': 'a', 'ɩ': 'i',
}

// lookAlike returns the Latin letter r is drawn like, or r.
func lookAlike(r rune) rune {
	if r < 0x0131 {
		return r
	}
	if l, ok := lookAlikes[r]; ok {
		return l
	}
	return r
}
