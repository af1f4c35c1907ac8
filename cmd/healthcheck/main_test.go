package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestRun: 0 when every URL answers 2xx; 1 naming the URL when one answers
// otherwise, does not answer in time or cannot be reached; 2 on bad usage.
func TestRun(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"status":"ok"}`)) })
	mux.HandleFunc("/not-ready", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"status":"redis down"}`, http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	closed := httptest.NewServer(mux)
	closed.Close()

	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"ok", []string{srv.URL + "/ok", srv.URL + "/ok"}, 0, ""},
		{"503", []string{srv.URL + "/ok", srv.URL + "/not-ready"}, 1, "/not-ready: 503 Service Unavailable"},
		{"timeout", []string{"-timeout", "200ms", srv.URL + "/slow"}, 1, "/slow:"},
		{"refused", []string{closed.URL + "/ok"}, 1, closed.URL},
		{"no url", nil, 2, "usage"},
		{"bad flag", []string{"-nope", srv.URL}, 2, "-nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			start := time.Now()
			if code := run(tc.args, &out); code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, out.String())
			}
			if !strings.Contains(out.String(), tc.out) {
				t.Errorf("stderr %q does not name %q", out.String(), tc.out)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}
