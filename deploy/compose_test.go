package deploy_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// compose is the part of docker-compose.yml the tests read.
type compose struct {
	Services map[string]struct {
		Image       string
		Ports       []any
		Environment map[string]string
		Volumes     []string
		Healthcheck *struct {
			Test    []string
			Disable bool
		}
		// DependsOn is a list of names (wait for the start) or a map of
		// name to {condition}.
		DependsOn any `yaml:"depends_on"`
		Networks  map[string]struct {
			IPv4 string `yaml:"ipv4_address"`
		}
	}
	Networks map[string]struct {
		IPAM struct {
			Config []struct{ Subnet string }
		}
	}
}

func readCompose(tb testing.TB) compose {
	tb.Helper()
	src, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		tb.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(src, &c); err != nil {
		tb.Fatalf("docker-compose.yml: %v", err)
	}
	if len(c.Services) == 0 {
		tb.Fatal("docker-compose.yml: no services")
	}
	return c
}

// published returns the host addresses a service's ports bind: "" for
// every interface. Short syntax: [IP:]HOST:CONTAINER[/proto]; long syntax:
// a map with host_ip.
func published(tb testing.TB, ports []any) []string {
	tb.Helper()
	var out []string
	for _, p := range ports {
		switch p := p.(type) {
		case string:
			parts := strings.Split(strings.SplitN(p, "/", 2)[0], ":")
			switch len(parts) {
			case 1, 2:
				out = append(out, "")
			case 3:
				out = append(out, parts[0])
			default:
				tb.Fatalf("port %q: unexpected form", p)
			}
		case map[string]any:
			ip, _ := p["host_ip"].(string)
			out = append(out, ip)
		default:
			tb.Fatalf("port %v: unexpected form", p)
		}
	}
	return out
}

// TestComposePublishesOnlyTheEdge: viewers and clients reach the service
// through the edge alone (a published comet bypasses the edge's
// per-address limit); Prometheus and Grafana, which have no auth of their
// own or only a password, and logic's admin port bind the host's loopback.
func TestComposePublishesOnlyTheEdge(t *testing.T) {
	c := readCompose(t)
	for name, s := range c.Services {
		for _, ip := range published(t, s.Ports) {
			switch {
			case name == "edge":
			case strings.HasPrefix(name, "comet"), strings.HasPrefix(name, "job"), name == "redis", name == "kafka":
				t.Errorf("%s publishes a port (%v): only the edge faces the network", name, s.Ports)
			case ip != "127.0.0.1":
				t.Errorf("%s publishes %v on every interface: bind 127.0.0.1", name, s.Ports)
			}
		}
	}
	if len(c.Services["edge"].Ports) == 0 {
		t.Error("the edge publishes no port")
	}
}

// TestComposeTrustsOnlyTheEdge: logic reads X-Forwarded-For only from the
// edge's fixed address, inside the compose network's subnet; trusting a
// private range lets any host of the LAN pick its rate-limit address.
func TestComposeTrustsOnlyTheEdge(t *testing.T) {
	c := readCompose(t)
	edge := c.Services["edge"].Networks["default"].IPv4
	addr, err := netip.ParseAddr(edge)
	if err != nil {
		t.Fatalf("the edge has no fixed address on the default network (%q): logic cannot trust it alone", edge)
	}
	trusted := c.Services["logic"].Environment["DANMAKU_LOGIC_TRUSTED_PROXIES"]
	for _, p := range strings.Split(trusted, ",") {
		p = strings.TrimSpace(p)
		if p != edge && p != edge+"/32" {
			t.Errorf("logic trusts %q: only the edge (%s) may set X-Forwarded-For", p, edge)
		}
	}
	cfg := c.Networks["default"].IPAM.Config
	if len(cfg) != 1 {
		t.Fatalf("default network: want one fixed subnet, got %v", cfg)
	}
	if pfx, err := netip.ParsePrefix(cfg[0].Subnet); err != nil || !pfx.Contains(addr) {
		t.Errorf("the edge's %s is not in the network's subnet %q", edge, cfg[0].Subnet)
	}
}

// TestComposeLimits: the comets keep a per-address limit, and the edge
// limits each client address.
func TestComposeLimits(t *testing.T) {
	c := readCompose(t)
	for name, s := range c.Services {
		if !strings.HasPrefix(name, "comet") {
			continue
		}
		n, err := strconv.Atoi(s.Environment["DANMAKU_COMET_MAX_CONNS_PER_IP"])
		if v, set := s.Environment["DANMAKU_COMET_MAX_CONNS_PER_IP"]; set && (err != nil || n <= 0) {
			t.Errorf("%s: DANMAKU_COMET_MAX_CONNS_PER_IP=%q turns the per-address limit off", name, v)
		}
	}
	server := find(parseNginx(t, "nginx.conf"), "server")
	if len(server) != 1 {
		t.Fatalf("nginx.conf: want one server, got %d", len(server))
	}
	if len(find(server[0].block, "limit_conn")) == 0 {
		t.Error("nginx.conf: the server has no limit_conn: nothing limits a client address")
	}
}

// TestComposeHealthchecks: every service has a health check, and services
// that others wait for are waited for until healthy.
func TestComposeHealthchecks(t *testing.T) {
	c := readCompose(t)
	for name, s := range c.Services {
		if s.Healthcheck == nil || s.Healthcheck.Disable || len(s.Healthcheck.Test) == 0 || s.Healthcheck.Test[0] == "NONE" {
			t.Errorf("%s has no health check", name)
			continue
		}
		switch deps := s.DependsOn.(type) {
		case []any:
			t.Errorf("%s waits for %v to start, not to be healthy", name, deps)
		case map[string]any:
			for dep, d := range deps {
				if c, _ := d.(map[string]any)["condition"].(string); c != "service_healthy" {
					t.Errorf("%s waits for %s to start, not to be healthy", name, dep)
				}
			}
		}
	}
	// The image has no shell: its services probe with cmd/healthcheck,
	// which the Dockerfile must build.
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(df), "./cmd/healthcheck") {
		t.Error("Dockerfile does not build ./cmd/healthcheck")
	}
	for _, name := range []string{"logic", "job-1", "job-2", "comet-1", "comet-2"} {
		s := c.Services[name]
		if s.Healthcheck == nil || strings.Join(s.Healthcheck.Test[:2], " ") != "CMD /usr/local/bin/healthcheck" {
			t.Errorf("%s: health check %v does not run /usr/local/bin/healthcheck", name, s.Healthcheck)
		}
	}
}

// TestComposeAdmin: the admin API is on with a secret that compose takes
// from the environment (never a literal in the file), and the edge does
// not forward it or the other admin-secret routes.
func TestComposeAdmin(t *testing.T) {
	c := readCompose(t)
	secret := c.Services["logic"].Environment["DANMAKU_LOGIC_ADMIN_SECRET"]
	if !regexp.MustCompile(`^\$\{[A-Z_]+:\?[^}]+\}$`).MatchString(secret) {
		t.Errorf("DANMAKU_LOGIC_ADMIN_SECRET = %q: want ${VAR:?message}, required from the environment", secret)
	}
	// The admin API has a listener of its own, so logic's public port
	// does not serve it at all.
	if c.Services["logic"].Environment["DANMAKU_LOGIC_ADMIN_ADDR"] == "" {
		t.Error("logic has no DANMAKU_LOGIC_ADMIN_ADDR: the admin API is on its public listener")
	}
	server := find(parseNginx(t, "nginx.conf"), "server")[0]
	for _, loc := range [][]string{{"^~", "/logic/admin/"}, {"^~", "/logic/push/"}, {"=", "/logic/broadcast"}} {
		d := location(server.block, loc...)
		if d == nil {
			t.Errorf("nginx.conf: no location %s: /logic/ forwards it to logic", strings.Join(loc, " "))
			continue
		}
		if !refuses(d) {
			t.Errorf("nginx.conf: location %s does not refuse (return 4xx or deny all)", strings.Join(loc, " "))
		}
	}
}

// refuses reports whether a location answers every request with a 4xx.
func refuses(d *directive) bool {
	if len(find(d.block, "proxy_pass")) > 0 {
		return false
	}
	for _, r := range find(d.block, "return") {
		if len(r.args) > 0 && strings.HasPrefix(r.args[0], "4") {
			return true
		}
	}
	for _, r := range find(d.block, "deny") {
		if len(r.args) == 1 && r.args[0] == "all" {
			return true
		}
	}
	return false
}

// TestEdgeProxies: every proxied location sets X-Forwarded-For to the
// peer's address (appending would keep what a client wrote), the page's
// /metrics link reaches logic, and each upstream server is a compose
// service.
func TestEdgeProxies(t *testing.T) {
	c := readCompose(t)
	conf := parseNginx(t, "nginx.conf")
	server := find(conf, "server")[0]
	upstreams := map[string]bool{}
	for _, u := range find(conf, "upstream") {
		upstreams[u.args[0]] = true
		for _, s := range find(u.block, "server") {
			host := strings.SplitN(s.args[0], ":", 2)[0]
			if _, ok := c.Services[host]; !ok {
				t.Errorf("upstream %s: server %s is no compose service", u.args[0], host)
			}
		}
	}
	for _, loc := range find(server.block, "location") {
		pp := find(loc.block, "proxy_pass")
		if len(pp) == 0 || strings.Contains(strings.Join(loc.args, " "), "/metrics") {
			continue
		}
		xff := ""
		for _, h := range find(loc.block, "proxy_set_header") {
			if strings.EqualFold(h.args[0], "X-Forwarded-For") {
				xff = h.args[1]
			}
		}
		if xff != "$remote_addr" {
			t.Errorf("location %s: X-Forwarded-For %q, want $remote_addr", strings.Join(loc.args, " "), xff)
		}
	}
	m := location(server.block, "=", "/metrics")
	if m == nil {
		t.Fatal("nginx.conf: no location = /metrics: the page's metrics link is a 404 through the edge")
	}
	pp := find(m.block, "proxy_pass")
	if len(pp) != 1 || pp[0].args[0] != "http://logic_admin/metrics" || !upstreams["logic_admin"] {
		t.Errorf("location = /metrics: proxy_pass %v, want http://logic_admin/metrics", pp)
	}
}

// TestComposeMonitoring: Prometheus loads the alert rules and Grafana the
// dashboard and its data source; every file compose mounts exists.
func TestComposeMonitoring(t *testing.T) {
	c := readCompose(t)
	mounts := map[string]string{}
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if !strings.HasPrefix(parts[0], "./") {
				continue
			}
			if _, err := os.Stat(filepath.Join("..", parts[0])); err != nil {
				t.Errorf("%s mounts %s: %v", name, parts[0], err)
			}
			mounts[parts[1]] = parts[0]
		}
	}
	want := map[string]string{
		"/etc/prometheus/prometheus.yml": "./deploy/prometheus/prometheus.yml",
		"/etc/prometheus/rules":          "./deploy/prometheus/rules",
		"/etc/grafana/provisioning":      "./deploy/grafana/provisioning",
		"/var/lib/grafana/dashboards":    "./deploy/grafana/dashboards",
	}
	for in, src := range want {
		if mounts[in] != src {
			t.Errorf("%s is mounted from %q, want %s", in, mounts[in], src)
		}
	}
	var prom struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	src, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(src, &prom); err != nil {
		t.Fatal(err)
	}
	if len(prom.RuleFiles) == 0 || !strings.HasPrefix(prom.RuleFiles[0], "/etc/prometheus/rules/") {
		t.Errorf("prometheus.yml loads no rules from /etc/prometheus/rules/: %v", prom.RuleFiles)
	}
}
