package danmaku_test

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"testing"

	"github.com/danmaku/danmaku"
)

// The positions record of docs/protocol.md decodes, checks and encodes
// back to itself; broken ones are EINVALID with the field named.
func TestPositionsRecord(t *testing.T) {
	doc, err := os.ReadFile("docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	ex := regexp.MustCompile(`\{"v":1,"room":"[^"]+","epoch"[^\n]*\}`).Find(doc)
	if ex == nil {
		t.Fatal("docs/protocol.md has no positions record")
	}
	p, err := danmaku.UnmarshalPositions(ex)
	if err != nil {
		t.Fatal(err)
	}
	out, err := danmaku.MarshalPositions(p)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	json.Unmarshal(ex, &want)
	json.Unmarshal(out, &got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s encodes back as %s", ex, out)
	}
	for field, bad := range map[string]string{
		"positions":      `{"v":1,`,
		"positions.v":    `{"v":2,"room":"r","epoch":"e","pos":1,"ids":["a"]}`,
		"positions.ids":  `{"v":1,"room":"r","epoch":"e","pos":1,"ids":[]}`,
		"positions.pos":  `{"v":1,"room":"r","epoch":"e","pos":0,"ids":["a"]}`,
		"positions.room": `{"v":1,"room":"a b","epoch":"e","pos":1,"ids":["a"]}`,
	} {
		_, err := danmaku.UnmarshalPositions([]byte(bad))
		var e *danmaku.Error
		if !errors.As(err, &e) || e.Code != danmaku.EINVALID || e.Field != field {
			t.Errorf("%s: %v, want EINVALID naming %s", bad, err, field)
		}
	}
}
