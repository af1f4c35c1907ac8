package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestDeflateViewers reads a gorilla server that compresses once per
// prepared message, as the comet does, through three viewers: each gets
// every message whole (one of them written in fragments), the big message
// is inflated once for the three, a ping is answered with its payload and
// a close comes out as a *websocket.CloseError.
func TestDeflateViewers(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"op":"msgs","room":"r","msgs":[`)
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, `{"id":"%x","pos":%d,"content":"lt:%d:%d"},`, i*7919, i, i*31, time.Now().UnixNano())
	}
	b.WriteString(`{}]}`)
	big := []byte(b.String())
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, big)
	if err != nil {
		t.Fatal(err)
	}
	var pongs atomic.Int32
	up := websocket.Upgrader{EnableCompression: true, WriteBufferSize: 1024}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		ws.SetPongHandler(func(s string) error {
			if s == "are you there" {
				pongs.Add(1)
			}
			return nil
		})
		go func() {
			for {
				if _, _, err := ws.NextReader(); err != nil {
					return
				}
			}
		}()
		ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"welcome"}`))
		ws.WritePreparedMessage(pm)
		ws.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(time.Second))
		ws.EnableWriteCompression(false)
		ws.WriteMessage(websocket.TextMessage, big) // fragmented by the 1 KiB write buffer
		time.Sleep(100 * time.Millisecond)          // the pong arrives before the close
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4008, "slow"), time.Now().Add(time.Second))
	}))
	defer srv.Close()
	target := strings.TrimPrefix(srv.URL, "http://")
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	cache := newInflateCache()
	for i := 0; i < 3; i++ {
		c, _, err := dialDeflate(context.Background(), dial, target, "room=r", 5*time.Second, cache)
		if err != nil {
			t.Fatal(err)
		}
		want := [][]byte{[]byte(`{"op":"welcome"}`), big, big}
		for k, w := range want {
			_, r, err := c.NextReader()
			if err != nil {
				t.Fatalf("viewer %d, message %d: %v", i, k, err)
			}
			got, _ := io.ReadAll(r)
			if !bytes.Equal(got, w) {
				t.Fatalf("viewer %d, message %d: %d bytes, want %d", i, k, len(got), len(w))
			}
		}
		_, _, err = c.NextReader()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 4008 || ce.Text != "slow" {
			t.Fatalf("viewer %d: after the messages %v, want close 4008 slow", i, err)
		}
		c.NetConn().Close()
	}
	if n := pongs.Load(); n != 3 {
		t.Errorf("pongs with the ping's payload: %d, want 3", n)
	}
	// Each viewer inflates its small welcome; the big message once.
	if in, sh := cache.inflated.Load(), cache.shared.Load(); in != 4 || sh != 2 {
		t.Errorf("inflated %d, shared %d; want 4 and 2", in, sh)
	}
}

// TestDeflateRefused: a refused handshake returns the response, for the
// failure's reason.
func TestDeflateRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "full", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	_, resp, err := dialDeflate(context.Background(), dial, strings.TrimPrefix(srv.URL, "http://"), "", time.Second, newInflateCache())
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("refused handshake: resp %v, err %v", resp, err)
	}
}
