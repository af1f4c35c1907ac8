package wordfilter

import (
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/danmaku/danmaku/internal/unitext"
)

// automaton is an Aho-Corasick automaton over the blocked words, built once
// per list and read-only afterwards, so any number of goroutines share it.
//
// Case-insensitivity costs nothing at match time: every rune of a word is
// replaced by a class shared by all runes of its simple case-folding orbit
// (k, K and the Kelvin sign K are one class), and input runes are looked up
// by class directly. Runes in no word have class 0, which always leads back
// to the root.
type automaton struct {
	words []string // original spellings, by word id

	low  []int32        // class of runes below len(low); 0 = none
	high map[rune]int32 // class of runes from len(low) up

	root      []int32 // next state from the root, by class (0 = root)
	edgeStart []int32 // state s's edges are edges[edgeStart[s]:edgeStart[s+1]]
	edges     []edge  // sorted by class within a state
	fail      []int32 // longest proper suffix that is a trie state
	outLen    []int32 // runes of the longest word ending in the state, 0 = none
	outWord   []int32 // that word's id
}

type edge struct{ class, next int32 }

// node is a trie state while building.
type node struct {
	kids []edge
	word int32 // id of the word ending here, -1 = none
	len  int32 // depth in runes
}

// compile builds the automaton of the matching forms (unitext.Fold) of
// words (already trimmed, with visible characters, deduplicated by their
// folded matching forms).
func compile(words []string) *automaton {
	a := &automaton{words: words, high: map[rune]int32{}}
	classOf := map[rune]int32{} // canonical fold -> class
	var maxLow rune = -1
	classify := func(r rune) int32 {
		c := fold(r)
		if id, ok := classOf[c]; ok {
			return id
		}
		id := int32(len(classOf) + 1)
		classOf[c] = id
		for o := r; ; {
			if o < 0x10000 && o > maxLow {
				maxLow = o
			}
			if o = unicode.SimpleFold(o); o == r {
				break
			}
		}
		return id
	}
	nodes := []node{{word: -1}}
	for id, w := range words {
		s := int32(0)
		for _, r := range unitext.FoldString(w) {
			c := classify(r)
			next := int32(-1)
			for _, e := range nodes[s].kids {
				if e.class == c {
					next = e.next
					break
				}
			}
			if next < 0 {
				next = int32(len(nodes))
				nodes = append(nodes, node{word: -1, len: nodes[s].len + 1})
				nodes[s].kids = append(nodes[s].kids, edge{c, next})
			}
			s = next
		}
		nodes[s].word = int32(id)
	}
	a.fillClasses(classOf, maxLow)
	a.link(nodes, len(classOf)+1)
	return a
}

// fillClasses writes the class of every member of each class's fold orbit
// into the lookup tables: a slice for the BMP runes up to the largest one
// used, a map beyond.
func (a *automaton) fillClasses(classOf map[rune]int32, maxLow rune) {
	a.low = make([]int32, maxLow+1)
	for c, id := range classOf {
		for o := c; ; {
			if o < rune(len(a.low)) {
				a.low[o] = id
			} else {
				a.high[o] = id
			}
			if o = unicode.SimpleFold(o); o == c {
				break
			}
		}
	}
}

// link computes failure links and outputs breadth first and flattens the
// trie into sorted edge lists.
func (a *automaton) link(nodes []node, classes int) {
	n := len(nodes)
	a.fail = make([]int32, n)
	a.outLen = make([]int32, n)
	a.outWord = make([]int32, n)
	a.edgeStart = make([]int32, n+1)
	a.root = make([]int32, classes)
	for s := range nodes {
		slices.SortFunc(nodes[s].kids, func(x, y edge) int { return int(x.class - y.class) })
		a.edgeStart[s+1] = a.edgeStart[s] + int32(len(nodes[s].kids))
		a.edges = append(a.edges, nodes[s].kids...)
	}
	queue := make([]int32, 0, n)
	for _, e := range nodes[0].kids {
		a.root[e.class] = e.next
		queue = append(queue, e.next)
	}
	for i := 0; i < len(queue); i++ {
		s := queue[i]
		// The output of s is its own word, else the longest word ending in
		// its failure state: every word ending here is a suffix of it.
		if w := nodes[s].word; w >= 0 {
			a.outLen[s], a.outWord[s] = nodes[s].len, w
		} else {
			f := a.fail[s]
			a.outLen[s], a.outWord[s] = a.outLen[f], a.outWord[f]
		}
		for _, e := range nodes[s].kids {
			a.fail[e.next] = a.step(a.fail[s], e.class)
			queue = append(queue, e.next)
		}
	}
}

// class returns the class of r, 0 when r is in no word.
func (a *automaton) class(r rune) int32 {
	if uint32(r) < uint32(len(a.low)) {
		return a.low[r]
	}
	if len(a.high) == 0 {
		return 0
	}
	return a.high[r]
}

// step returns the state after reading a rune of class c in state s.
func (a *automaton) step(s, c int32) int32 {
	if c == 0 {
		return 0
	}
	for s != 0 {
		kids := a.edges[a.edgeStart[s]:a.edgeStart[s+1]]
		if len(kids) <= 8 {
			for _, e := range kids {
				if e.class == c {
					return e.next
				}
			}
		} else if i, ok := slices.BinarySearchFunc(kids, c, func(e edge, c int32) int { return int(e.class - c) }); ok {
			return kids[i].next
		}
		s = a.fail[s]
	}
	return a.root[c]
}

// first returns the id of the longest word ending at the earliest position
// where any word ends in the matching form of s (unitext.Fold), or -1.
// ASCII text is its own matching form and is scanned in place.
func (a *automaton) first(s string) int32 {
	if !isASCII(s) {
		folded, _ := unitext.Fold(s)
		return a.firstRunes(folded)
	}
	st := int32(0)
	for i := 0; i < len(s); i++ {
		st = a.step(st, a.class(rune(s[i])))
		if a.outLen[st] > 0 {
			return a.outWord[st]
		}
	}
	return -1
}

func (a *automaton) firstRunes(rs []rune) int32 {
	st := int32(0)
	for _, r := range rs {
		st = a.step(st, a.class(r))
		if a.outLen[st] > 0 {
			return a.outWord[st]
		}
	}
	return -1
}

// maskEnd is the end (exclusive, in characters of the text) of a match
// whose last folded rune is folded[i]: the characters dropped from the
// matching form right after it (an accent on its last letter, an
// invisible character) belong to it.
func maskEnd(origin []int32, i, n int) int32 {
	if i+1 < len(origin) {
		return origin[i+1]
	}
	return int32(n)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// mask returns s with every character that is part of a match replaced by
// '*', and whether anything was replaced. s is copied only when it
// matches. Matches are found in the matching form of s; a match covers
// every character of s from the one its first rune came from to the one
// its last came from, the invisible ones and marks between and right
// after included.
func (a *automaton) mask(s string) (string, bool) {
	if a.first(s) < 0 {
		return s, false
	}
	runes := []rune(s)
	folded, origin := unitext.Fold(s)
	st := int32(0)
	for i, r := range folded {
		st = a.step(st, a.class(r))
		// Every word ending here lies inside the longest one. The scan
		// reads the folded copy, so masking the original never changes
		// what it reads. Masked stretches may overlap; rewriting a '*'
		// costs at most MaxWordLen runes per match.
		if n := int(a.outLen[st]); n > 0 {
			for j := origin[i-n+1]; j < maskEnd(origin, i, len(runes)); j++ {
				runes[j] = '*'
			}
		}
	}
	return string(runes), true
}

// fold returns the canonical member of r's simple case-folding orbit (the
// smallest), so that all case variants of a rune compare equal.
func fold(r rune) rune {
	m := r
	for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
		m = min(m, o)
	}
	return m
}
