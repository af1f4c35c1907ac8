package deploy_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// helmModule is the helm the tests run, built once with go install into the
// user's cache directory and kept there across runs (the build takes
// minutes; a version change builds again).
const helmModule, helmVersion = "helm.sh/helm/v3/cmd/helm", "v3.22.0"

const chart = "helm/danmaku"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns the path of the pinned helm, building it on first use. A
// helm that cannot be built fails the test: the chart is never left
// unchecked.
func helm(tb testing.TB) string {
	tb.Helper()
	helmOnce.Do(func() { helmPath, helmErr = buildHelm() })
	if helmErr != nil {
		tb.Fatalf("helm %s: %v", helmVersion, helmErr)
	}
	return helmPath
}

func buildHelm() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "danmaku-tools", "helm-"+helmVersion)
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	// Built into a directory of its own, then renamed: a run that is
	// stopped halfway leaves no half-written binary behind.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "helm-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", helmModule+"@"+helmVersion)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{err: err, out: out}
	}
	if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
		if _, statErr := os.Stat(bin); statErr != nil {
			return "", err
		}
	}
	println("built helm", helmVersion, "in", time.Since(start).Round(time.Second).String(), "into", dir)
	return bin, nil
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return "go install: " + e.err.Error() + "\n" + string(e.out) }

// valueSets are the chart's CI value files, each rendered and linted.
func valueSets(tb testing.TB) []string {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(chart, "ci", "*.yaml"))
	if len(files) < 3 {
		tb.Fatalf("want the value sets standalone, cluster and existing-secret in %s/ci, got %v", chart, files)
	}
	return files
}

// render runs helm template with a values file and decodes the output.
func render(t *testing.T, values string, set ...string) *manifests {
	t.Helper()
	args := []string{"template", "rel", chart, "--namespace", "live", "-f", values}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helm(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	m, err := parseManifests(out)
	if err != nil {
		t.Fatalf("%s: %v\n%s", values, err, out)
	}
	return m
}

// TestHelmChart renders the chart for each value set, lints it with
// --strict, decodes every object strictly and checks what ties them
// together (selectors, references, ports, probes), then what each value set
// must produce.
func TestHelmChart(t *testing.T) {
	documented := documentedEnv(t)
	for _, values := range valueSets(t) {
		t.Run(strings.TrimSuffix(filepath.Base(values), ".yaml"), func(t *testing.T) {
			if out, err := exec.Command(helm(t), "lint", "--strict", chart, "-f", values).CombinedOutput(); err != nil {
				t.Fatalf("helm lint --strict: %v\n%s", err, out)
			}
			m := render(t, values)
			existing := ""
			if strings.Contains(values, "existing-secret") {
				existing = "danmaku-prod"
			}
			for _, e := range m.check(existing) {
				t.Error(e)
			}
			roles := map[string]container{}
			for _, d := range m.Deployments {
				c := d.Spec.Template.Spec.Containers[0]
				roles[c.Name] = c
				for _, e := range c.Env {
					if strings.HasPrefix(e.Name, "DANMAKU_") && !documented[e.Name] {
						t.Errorf("%s sets %s, which no binary reads (docs/config.md)", d.Metadata.Name, e.Name)
					}
				}
			}
			for k := range m.ConfigMaps[0].Data {
				if !documented[k] {
					t.Errorf("ConfigMap sets %s, which no binary reads (docs/config.md)", k)
				}
			}
			for _, r := range []string{"logic", "job", "comet"} {
				if _, ok := roles[r]; !ok {
					t.Errorf("no %s Deployment", r)
				}
			}
			if len(m.PDBs) == 0 {
				t.Error("no PodDisruptionBudget")
			}
			checkSecrets(t, m, roles, existing)
			checkComet(t, roles["comet"])
			switch filepath.Base(values) {
			case "standalone.yaml":
				checkConfig(t, m, "redis-master.data:6379", "kafka-0.kafka:9092,kafka-1.kafka:9092,kafka-2.kafka:9092")
				checkHPAs(t, m, "rel-danmaku-comet", "rel-danmaku-logic")
			case "cluster.yaml":
				checkConfig(t, m, "redis-0.redis:6379,redis-1.redis:6379,redis-2.redis:6379", "kafka.data:9092")
				if _, ok := m.ConfigMaps[0].Data["DANMAKU_REDIS_DB"]; ok {
					t.Error("Redis Cluster has no databases but 0: DANMAKU_REDIS_DB set")
				}
				checkHPAs(t, m)
				checkIngress(t, m)
				// The page of the Ingress' name may open /ws and send.
				for _, env := range []string{"DANMAKU_COMET_ALLOWED_ORIGINS", "DANMAKU_LOGIC_ALLOWED_ORIGINS"} {
					r := strings.ToLower(strings.Split(env, "_")[1])
					if e, _ := roles[r].env(env); e.Value != "https://live.example.com" {
						t.Errorf("%s: %s = %q, want the Ingress' origin", r, env, e.Value)
					}
				}
				for _, r := range []string{"logic", "comet"} {
					if e, _ := roles[r].env("DANMAKU_" + strings.ToUpper(r) + "_AUTH"); e.Value != "jwt" {
						t.Errorf("%s: auth %q, want jwt", r, e.Value)
					}
					if _, ok := roles[r].env("DANMAKU_AUTH_HMAC_SECRET"); !ok {
						t.Errorf("%s has no DANMAKU_AUTH_HMAC_SECRET", r)
					}
				}
			case "existing-secret.yaml":
				checkConfig(t, m, "10.0.0.5:6379", "b-1.kafka.internal:9094,b-2.kafka.internal:9094")
				if len(m.Secrets) != 0 {
					t.Errorf("an existing Secret is named, yet the chart renders %d", len(m.Secrets))
				}
				if img := roles["logic"].Image; img != "registry.example.com/danmaku:2026.11.1" {
					t.Errorf("image %q", img)
				}
			}
		})
	}
}

// checkSecrets: job and comet take the push secret from one key of one
// Secret; logic's admin secret comes from the Secret too, never a literal.
func checkSecrets(t *testing.T, m *manifests, roles map[string]container, existing string) {
	t.Helper()
	var refs []string
	for _, r := range []struct{ role, env string }{{"job", "DANMAKU_JOB_PUSH_SECRET"}, {"comet", "DANMAKU_COMET_SECRET"}} {
		e, ok := roles[r.role].env(r.env)
		if !ok || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Optional {
			t.Errorf("%s: %s is not a required Secret key: %+v", r.role, r.env, e)
			continue
		}
		refs = append(refs, e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key)
	}
	if len(refs) == 2 && refs[0] != refs[1] {
		t.Errorf("job and comet read different push secrets: %v", refs)
	}
	if e, ok := roles["logic"].env("DANMAKU_LOGIC_ADMIN_SECRET"); !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Errorf("logic: the admin secret is not from a Secret: %+v", e)
	}
	// The admin API and /metrics on a listener of their own.
	if e, _ := roles["logic"].env("DANMAKU_LOGIC_ADMIN_ADDR"); e.Value != ":8091" || !roles["logic"].hasPort(8091) {
		t.Errorf("logic: admin listener %q, port 8091 declared: %v", e.Value, roles["logic"].hasPort(8091))
	}
	for _, s := range m.Secrets {
		for k, v := range s.Data {
			raw, err := base64.StdEncoding.DecodeString(v)
			if err != nil || (k == "push-secret" && len(raw) < 16) {
				t.Errorf("Secret %s: %s is %d bytes (%v)", s.Metadata.Name, k, len(raw), err)
			}
		}
	}
	if existing == "" && len(m.Secrets) != 1 {
		t.Errorf("want the chart's Secret, got %d", len(m.Secrets))
	}
	// A Secret's hash in a pod annotation can be brute-forced offline when
	// the secret is weak: none.
	for _, d := range m.Deployments {
		for k := range d.Spec.Template.Metadata.Annotations {
			if strings.Contains(k, "secret") {
				t.Errorf("%s: pod annotation %s", d.Metadata.Name, k)
			}
		}
	}
}

// checkComet: a comet's id and push address are its pod's own, its
// internal listener is reachable from job, and it has time to close its
// viewers.
func checkComet(t *testing.T, c container) {
	t.Helper()
	want := map[string]string{
		"DANMAKU_COMET_ID":        "fieldRef:metadata.name",
		"POD_IP":                  "fieldRef:status.podIP",
		"DANMAKU_COMET_ADVERTISE": "$(POD_IP):8081",
		"DANMAKU_COMET_LISTEN":    ":8080",
		// The internal listener's default is loopback; job pushes to it.
		"DANMAKU_COMET_INTERNAL_LISTEN": ":8081",
	}
	for name, v := range want {
		e, ok := c.env(name)
		got := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			got = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		}
		if !ok || got != v {
			t.Errorf("comet: %s = %q, want %q", name, got, v)
		}
	}
	// $(POD_IP) is expanded only from variables defined before it.
	pos := map[string]int{}
	for i, e := range c.Env {
		pos[e.Name] = i
	}
	if pos["POD_IP"] > pos["DANMAKU_COMET_ADVERTISE"] {
		t.Error("comet: POD_IP is defined after DANMAKU_COMET_ADVERTISE uses it")
	}
}

func checkConfig(t *testing.T, m *manifests, redis, kafka string) {
	t.Helper()
	if len(m.ConfigMaps) != 1 {
		t.Fatalf("want one ConfigMap, got %d", len(m.ConfigMaps))
	}
	d := m.ConfigMaps[0].Data
	if d["DANMAKU_REDIS_ADDRS"] != redis || d["DANMAKU_KAFKA_BROKERS"] != kafka {
		t.Errorf("ConfigMap: redis %q kafka %q, want %q %q", d["DANMAKU_REDIS_ADDRS"], d["DANMAKU_KAFKA_BROKERS"], redis, kafka)
	}
}

// checkHPAs: the Deployments scaled automatically, by name.
func checkHPAs(t *testing.T, m *manifests, want ...string) {
	t.Helper()
	var got []string
	for _, h := range m.HPAs {
		got = append(got, h.Spec.ScaleTargetRef.Name)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("HPAs scale %v, want %v", got, want)
	}
}

// checkIngress: browsers reach the page, /ws and the public API; no path
// reaches logic's admin or notice routes.
func checkIngress(t *testing.T, m *manifests) {
	t.Helper()
	if len(m.Ingresses) != 1 {
		t.Fatalf("want one Ingress, got %d", len(m.Ingresses))
	}
	routes := map[string]string{}
	for _, r := range m.Ingresses[0].Spec.Rules {
		for _, p := range r.HTTP.Paths {
			routes[p.PathType+" "+p.Path] = p.Backend.Service.Name
			if p.Backend.Service.Name == "rel-danmaku-logic" && (p.PathType != "Exact" || p.Backend.Service.Port.Name != "http") {
				t.Errorf("ingress: %s %s to logic's port %q reaches more than the public API", p.PathType, p.Path, p.Backend.Service.Port.Name)
			}
		}
	}
	for path, svc := range map[string]string{
		"Exact /logic/send": "rel-danmaku-logic", "Exact /logic/online": "rel-danmaku-logic",
		"Exact /logic/history": "rel-danmaku-logic", "Prefix /": "rel-danmaku-comet",
	} {
		if routes[path] != svc {
			t.Errorf("ingress: %s goes to %q, want %s", path, routes[path], svc)
		}
	}
}

// TestHelmChartRefusesBadValues: values the binaries would refuse or
// misread stop the rendering with a message naming the value.
func TestHelmChartRefusesBadValues(t *testing.T) {
	base := []string{"redis.addrs={r:6379}", "kafka.brokers={k:9092}", "secrets.pushSecret=0123456789abcdef"}
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"no redis", []string{"redis.addrs=null"}, "redis.addrs"},
		{"cluster of one", []string{"redis.cluster=true"}, "two or more seed nodes"},
		{"several without cluster", []string{"redis.addrs={a:6379,b:6379}"}, "set redis.cluster to true"},
		{"no kafka", []string{"kafka.brokers=null"}, "kafka.brokers"},
		{"no push secret", []string{"secrets.pushSecret="}, "secrets.pushSecret"},
		{"short push secret", []string{"secrets.pushSecret=short"}, "secrets.pushSecret"},
		{"short admin secret", []string{"secrets.adminSecret=short"}, "secrets.adminSecret"},
		{"ingress without host", []string{"ingress.enabled=true"}, "ingress.host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "rel", chart}
			for _, s := range append(append([]string{}, base...), tc.set...) {
				args = append(args, "--set", s)
			}
			out, err := exec.Command(helm(t), args...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("helm template %v: err %v, want an error naming %q:\n%.600s", tc.set, err, tc.want, out)
			}
		})
	}
}

// documentedEnv returns the DANMAKU_* variables of docs/config.md, the
// generated reference of every setting the binaries read.
func documentedEnv(tb testing.TB) map[string]bool {
	tb.Helper()
	src, err := os.ReadFile("../docs/config.md")
	if err != nil {
		tb.Fatal(err)
	}
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile("`(DANMAKU_[A-Z0-9_]+)`").FindAllStringSubmatch(string(src), -1) {
		vars[m[1]] = true
	}
	if len(vars) < 50 {
		tb.Fatalf("docs/config.md lists %d variables: not the reference table", len(vars))
	}
	return vars
}
