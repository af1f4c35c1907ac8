package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/danmaku/danmaku/configs"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/process"
)

// setting is one value config init writes into a role's file.
type setting struct {
	section, key, value string
}

// configInit writes DIR/logic.yaml, DIR/job.yaml and DIR/comet.yaml: the
// shipped files (every knob with its default and its comment) with fresh
// secrets that agree (job.push_secret is comet.secret; logic and comet
// share auth.hmac_secret) and, with -auth jwt (the default), token
// authentication on at both doors. Each file written is loaded and
// validated as its role would, so a file that would not start is never
// left behind.
func configInit(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("danmaku config init", flag.ContinueOnError)
	fset.SetOutput(stderr)
	authMode := fset.String("auth", config.AuthJWT, "jwt: logic and comet require tokens signed with the new auth.hmac_secret; off: no tokens")
	force := fset.Bool("force", false, "overwrite existing files")
	if err := fset.Parse(args); err != nil {
		return exitUsage(err)
	}
	if fset.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: danmaku config init [-auth jwt|off] [-force] DIR")
		return process.ExitConfig
	}
	if *authMode != config.AuthJWT && *authMode != config.AuthOff {
		fmt.Fprintf(stderr, "danmaku config init: -auth must be %s or %s, got %q\n", config.AuthJWT, config.AuthOff, *authMode)
		return process.ExitConfig
	}
	dir := fset.Arg(0)
	push, admin := randomHex(16), randomHex(16)
	files := map[string][]setting{
		"logic": {{"logic", "auth", *authMode}, {"logic", "admin_secret", admin}},
		"job":   {{"job", "push_secret", push}},
		"comet": {{"comet", "auth", *authMode}, {"comet", "secret", push}},
	}
	if *authMode == config.AuthJWT {
		hmac := randomHex(32)
		files["logic"] = append(files["logic"], setting{"auth", "hmac_secret", hmac})
		files["comet"] = append(files["comet"], setting{"auth", "hmac_secret", hmac})
	}
	roles := []string{"logic", "job", "comet"}
	if !*force {
		for _, role := range roles {
			path := filepath.Join(dir, role+".yaml")
			if _, err := os.Stat(path); err == nil {
				fmt.Fprintf(stderr, "danmaku config init: %s exists (-force overwrites it)\n", path)
				return process.ExitConfig
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "danmaku config init: %v\n", err)
		return process.ExitFailure
	}
	for _, role := range roles {
		path := filepath.Join(dir, role+".yaml")
		if err := writeRoleConfig(path, role, files[role]); err != nil {
			fmt.Fprintf(stderr, "danmaku config init: %s: %v\n", path, err)
			return process.ExitFailure
		}
		fmt.Fprintf(stdout, "wrote %s\n", path)
	}
	fmt.Fprintf(stdout, "job.push_secret and comet.secret agree; logic.admin_secret is the Bearer secret of /logic/admin/*")
	if *authMode == config.AuthJWT {
		fmt.Fprintf(stdout, "; tokens: danmaku token -config %s -uid 42", filepath.Join(dir, "logic.yaml"))
	}
	fmt.Fprintln(stdout)
	return 0
}

// writeRoleConfig writes the shipped file of role with the settings to
// path (mode 0600: it holds secrets), then loads it as the role would and
// checks that it is valid and holds the settings.
func writeRoleConfig(path, role string, settings []setting) error {
	b, err := fs.ReadFile(configs.Files, role+".yaml")
	if err != nil {
		return err
	}
	text := "# Written by danmaku config init with fresh secrets: keep it private.\n" + string(b)
	for _, s := range settings {
		if text, err = setYAML(text, s); err != nil {
			return err
		}
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return err
	}
	cfg, _ := roleConfig(role)
	if err := config.Parse(cfg, config.Options{Name: role, Args: []string{"-config", path}, Output: io.Discard}); err != nil {
		return err
	}
	if err := config.Validate(cfg); err != nil {
		return err
	}
	for _, s := range settings {
		if got := knobValue(cfg, s.section+"."+s.key); got != s.value {
			return fmt.Errorf("%s.%s reads %q, want %q", s.section, s.key, got, s.value)
		}
	}
	return nil
}

// setYAML replaces the value of key in the top-level section of a shipped
// file, keeping the line's comment. The files write one key per line,
// indented by two spaces under an unindented section name.
func setYAML(text string, s setting) (string, error) {
	lines := strings.Split(text, "\n")
	in := false
	key := regexp.MustCompile(`^(  ` + regexp.QuoteMeta(s.key) + `:\s*)("[^"]*"|[^\s#]+)(.*)$`)
	for i, l := range lines {
		if l != "" && l[0] != ' ' && l[0] != '#' {
			in = strings.HasPrefix(l, s.section+":")
			continue
		}
		if m := key.FindStringSubmatch(l); in && m != nil {
			lines[i] = m[1] + `"` + s.value + `"` + m[3]
			return strings.Join(lines, "\n"), nil
		}
	}
	return "", errors.New("no line " + s.section + "." + s.key + " in the shipped file")
}

// knobValue returns the value of the knob named key ("comet.secret") of
// cfg, a pointer to a configuration struct, as a flag would spell it.
func knobValue(cfg any, key string) string {
	for _, k := range config.Knobs(cfg) {
		if k.Key == key {
			return k.Default
		}
	}
	return ""
}

// randomHex returns n random bytes in hex (2n characters).
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
