package deploy_test

import (
	"strings"
	"testing"
)

// The edge's access log never holds a query string: viewers put their
// token in /ws?token=..., so a log format with $request, $request_uri,
// $args or $query_string would write tokens to the logs.
func TestEdgeAccessLogHasNoQuery(t *testing.T) {
	top := parseNginx(t, "nginx.conf")
	formats := map[string]string{}
	for _, d := range find(top, "log_format") {
		formats[d.args[0]] = strings.Join(d.args[1:], " ")
	}
	server := find(top, "server")[0]
	logs := find(server.block, "access_log")
	if len(logs) != 1 || len(logs[0].args) != 2 {
		t.Fatalf("nginx.conf: want one access_log with a named format in the server, got %d", len(logs))
	}
	f, ok := formats[logs[0].args[1]]
	if !ok {
		t.Fatalf("nginx.conf: access_log format %q is not defined", logs[0].args[1])
	}
	for _, v := range []string{"$request ", "$request\"", "$request_uri", "$args", "$query_string", "$arg_"} {
		if strings.Contains(f+" ", v) {
			t.Errorf("nginx.conf: log format %q logs the query (%s)", f, strings.Trim(v, " \""))
		}
	}
}
