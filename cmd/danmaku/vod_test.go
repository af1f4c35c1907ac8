package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danmaku/danmaku"
	"github.com/danmaku/danmaku/internal/testkit"
)

const vodAdminSecret = "admin-secret-of-the-vod-test"

// admin posts body to an admin route of m and decodes the answer.
func admin(t *testing.T, m *Main, path, body string) (int, danmaku.AdminResponse) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+m.Addr()+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+vodAdminSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out danmaku.AdminResponse
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func getJSON(url string, v any) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	return resp.StatusCode, json.Unmarshal(b, v)
}

// The all-in-one archives a stream: comments sent between the admin's
// stream/start and stream/end come back from GET /logic/vod/segment at
// their offsets, the one deleted meanwhile does not.
func TestVODAllInOne(t *testing.T) {
	m := startMain(t, func(c *Config) { c.Logic.AdminSecret = vodAdminSecret })
	room := testkit.Uniq("vod")
	code, start := admin(t, m, "/logic/admin/stream/start", fmt.Sprintf(`{"roomId":%q}`, room))
	if code != http.StatusOK || start.StreamID == "" {
		t.Fatalf("stream/start: %d %+v", code, start)
	}
	ids := send(t, m, room, "one", "two", "three")
	testkit.SucceedsSoon(t, 10*time.Second, func() error {
		if code, _ := admin(t, m, "/logic/admin/delete", fmt.Sprintf(`{"roomId":%q,"ids":[%q]}`, room, ids[1])); code != http.StatusOK {
			return fmt.Errorf("delete: %d", code)
		}
		return nil
	})
	if code, _ := admin(t, m, "/logic/admin/stream/end", fmt.Sprintf(`{"roomId":%q}`, room)); code != http.StatusOK {
		t.Fatalf("stream/end: %d", code)
	}
	base := "http://" + m.Addr() + "/logic/vod/"
	testkit.SucceedsSoon(t, 15*time.Second, func() error {
		var seg danmaku.VODSegmentResponse
		if _, err := getJSON(fmt.Sprintf("%ssegment?roomId=%s&streamId=%s&seg=0", base, room, start.StreamID), &seg); err != nil {
			return err
		}
		if !seg.Final || len(seg.Comments) != 2 || seg.Comments[0].ID != ids[0] || seg.Comments[1].ID != ids[2] ||
			seg.Comments[0].Offset < 0 || seg.Comments[1].Offset < seg.Comments[0].Offset || seg.Comments[1].Offset > 10000 {
			return fmt.Errorf("segment %+v, want %s and %s at their offsets, final", seg, ids[0], ids[2])
		}
		return nil
	})
	var streams danmaku.VODStreamsResponse
	if _, err := getJSON(base+"streams?roomId="+room, &streams); err != nil || len(streams.Streams) != 1 ||
		streams.Streams[0].ID != start.StreamID || streams.Streams[0].Live || streams.Streams[0].Count != 3 {
		t.Fatalf("streams %+v, %v", streams, err)
	}
}
