package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/danmaku/danmaku/internal/httpx"
	"github.com/danmaku/danmaku/logic"
)

// runFloor serves a bare POST /logic/send on addr until ctx ends: it reads
// and decodes the request like logic (its request and response types,
// default body limit and server timeouts) and answers 202 with one message
// id per message, with no rate limit, Redis or Kafka behind it. Scenario
// S4F drives it with S4's steps; its CPU per request is what net/http and encoding/json alone cost
// on the machine, the floor under logic's figure.
func runFloor(ctx context.Context, addr string) int {
	var next atomic.Uint64
	cfg := logic.DefaultConfig()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /logic/online", func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]int{"online": 0})
	})
	mux.HandleFunc("POST /logic/send", func(w http.ResponseWriter, r *http.Request) {
		var req logic.SendRequest
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, cfg.MaxBodyBytes))
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err != nil || req.RoomID == "" || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		ids := make([]string, len(req.Messages))
		for i := range ids {
			ids[i] = strconv.FormatUint(next.Add(1), 36)
		}
		httpx.WriteJSON(w, http.StatusAccepted, logic.SendResponse{MsgIDs: ids})
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout(), IdleTimeout: cfg.IdleTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Fprintf(os.Stderr, "http floor listening on %s\n", addr)
	select {
	case err := <-errc:
		fmt.Fprintln(os.Stderr, "loadtest: -http-floor:", err)
		return 2
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "loadtest: -http-floor:", err)
	}
	return 0
}
