package stack

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// TestPostRetriesUnavailable: a 503 is repeated with the same msgIds until
// logic accepts; any other refusal is returned at once.
func TestPostRetriesUnavailable(t *testing.T) {
	var seen [][]string
	answers := []int{503, 503, 202}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ MsgID string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		var keys []string
		for _, m := range req.Messages {
			keys = append(keys, m.MsgID)
		}
		seen = append(seen, keys)
		status := answers[min(len(seen), len(answers))-1]
		w.WriteHeader(status)
		if status == 202 {
			json.NewEncoder(w).Encode(map[string][]string{"msgIds": {"a", "b"}})
		}
	}))
	defer srv.Close()
	ids, err := Post(srv.URL, "r", 1, "n", []string{"x", "y"})
	if err != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("Post = %v, %v", ids, err)
	}
	if len(seen) != 3 || seen[0][0] == "" || seen[0][0] == seen[0][1] ||
		!slices.Equal(seen[0], seen[1]) || !slices.Equal(seen[1], seen[2]) {
		t.Fatalf("requests carried msgIds %v, want the same two keys three times", seen)
	}

	answers, seen = []int{429}, nil
	if _, err := Post(srv.URL, "r", 1, "n", []string{"x", "y"}); err == nil || len(seen) != 1 {
		t.Fatalf("a 429 was retried or accepted: %v after %d requests", err, len(seen))
	}
}
