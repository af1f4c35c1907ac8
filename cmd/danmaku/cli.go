package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/danmaku/danmaku/archive"
	"github.com/danmaku/danmaku/internal/auth"
	"github.com/danmaku/danmaku/internal/cometconfig"
	"github.com/danmaku/danmaku/internal/config"
	"github.com/danmaku/danmaku/internal/process"
	"github.com/danmaku/danmaku/job"
	"github.com/danmaku/danmaku/logic"
)

// The command-line verbs of the binary, beside running the service:
//
//	danmaku token -config FILE -uid 42 [-name Ann] [-rooms lobby,live-*] [-roles moderator] [-ttl 1h] [-key FILE]
//	danmaku config init [-auth jwt|off] [-force] DIR
//	danmaku config check [-role logic|job|comet|danmaku] FILE
//
// Each returns the process's exit status: 0, process.ExitConfig for bad
// arguments or an invalid file, process.ExitFailure when a file cannot be
// written.
var verbs = map[string]func(args []string, stdout, stderr io.Writer) int{
	"token":  tokenVerb,
	"config": configVerb,
}

// runVerb runs the verb named by args[0] when there is one, and reports
// whether it did.
func runVerb(args []string, stdout, stderr io.Writer) (int, bool) {
	if len(args) == 0 {
		return 0, false
	}
	v, ok := verbs[args[0]]
	if !ok {
		return 0, false
	}
	return v(args[1:], stdout, stderr), true
}

// tokenVerb mints a JWT the servers accept: HS256 with the auth section's
// hmac_secret (from -config FILE and DANMAKU_AUTH_* variables, as the roles
// read it), or RS256/ES256 with the private key of -key, whose public half
// is listed in auth.public_keys. The token carries the section's issuer and
// audience when it names them.
func tokenVerb(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("danmaku token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", "", "configuration file whose auth section the servers use (DANMAKU_AUTH_* variables apply too)")
	uid := fs.Int64("uid", 0, "user id (the sub claim), positive")
	name := fs.String("name", "", "display name (the name claim)")
	rooms := fs.String("rooms", "", "comma-separated rooms or prefix* patterns the token may use; empty: any room")
	roles := fs.String("roles", "", "comma-separated roles the token grants (moderator, member, priority, or your own); empty: none")
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token")
	key := fs.String("key", "", "PEM private key (RSA: RS256, EC P-256: ES256) instead of auth.hmac_secret")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: danmaku token -config FILE -uid ID [-name NAME] [-rooms R1,R2] [-roles moderator,priority] [-ttl 1h] [-key PRIVATE.pem]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "danmaku token: unexpected argument %q\n", fs.Arg(0))
		return process.ExitConfig
	}
	var sec struct {
		Auth auth.Section `yaml:"auth"`
	}
	var cargs []string
	if *file != "" {
		cargs = []string{"-config", *file}
	}
	if err := config.Parse(&sec, config.Options{Name: "danmaku token", Args: cargs, Environ: os.Environ(), Output: stderr}); err != nil {
		fmt.Fprintln(stderr, err)
		return process.ExitConfig
	}
	if *ttl <= 0 {
		fmt.Fprintln(stderr, "danmaku token: -ttl must be positive")
		return process.ExitConfig
	}
	now := time.Now()
	c := auth.Claims{UID: *uid, Name: *name, Issuer: sec.Auth.Issuer, IssuedAt: now, ExpiresAt: now.Add(*ttl)}
	if sec.Auth.Audience != "" {
		c.Audience = []string{sec.Auth.Audience}
	}
	if *rooms != "" {
		c.Rooms = strings.Split(*rooms, ",")
	}
	if *roles != "" {
		c.Roles = strings.Split(*roles, ",")
	}
	var tok string
	var err error
	switch {
	case *key != "":
		var pemBytes []byte
		if pemBytes, err = os.ReadFile(*key); err == nil {
			tok, err = auth.MintPEM(pemBytes, c)
		}
	case sec.Auth.HMACSecret != "":
		tok, err = auth.Mint([]byte(sec.Auth.HMACSecret), c)
	default:
		err = errors.New("no auth.hmac_secret in the configuration (-config FILE or DANMAKU_AUTH_HMAC_SECRET) and no -key")
	}
	if err != nil {
		fmt.Fprintf(stderr, "danmaku token: %v\n", err)
		return process.ExitConfig
	}
	fmt.Fprintln(stdout, tok)
	return 0
}

// configVerb dispatches "config init" and "config check".
func configVerb(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "init":
			return configInit(args[1:], stdout, stderr)
		case "check":
			return configCheck(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintln(stderr, "usage: danmaku config init [-auth jwt|off] [-force] DIR\n       danmaku config check [-role logic|job|comet|danmaku] FILE")
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		return 0
	}
	return process.ExitConfig
}

// roleConfig returns the configuration value (defaults filled) of a
// binary by name, as that binary loads and validates it.
func roleConfig(role string) (any, bool) {
	switch role {
	case "logic":
		c := logic.DefaultBinaryConfig()
		return &c, true
	case "job":
		c := job.DefaultBinaryConfig()
		return &c, true
	case "comet":
		c := cometconfig.Default()
		return &c, true
	case "archive":
		c := archive.DefaultBinaryConfig()
		return &c, true
	case "danmaku":
		c := DefaultConfig()
		return &c, true
	}
	return nil, false
}

// configCheck loads FILE, the environment's DANMAKU_* variables and any
// flags after FILE as the role would at start, and validates the result
// without starting anything: the errors and the exit status are the
// role's. The role is -role, or the file's name (logic.yaml is logic's).
func configCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("danmaku config check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "", "logic, job, comet, archive or danmaku; empty: from the file name")
	if err := fs.Parse(args); err != nil {
		return exitUsage(err)
	}
	if fs.NArg() < 1 {
		fmt.Fprintln(stderr, "usage: danmaku config check [-role logic|job|comet|archive|danmaku] FILE [-section.key=value ...]")
		return process.ExitConfig
	}
	file := fs.Arg(0)
	if *role == "" {
		*role = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(file), ".yaml"), ".yml")
	}
	cfg, ok := roleConfig(*role)
	if !ok {
		fmt.Fprintf(stderr, "danmaku config check: cannot tell the role of %s: name it with -role logic, job, comet, archive or danmaku\n", file)
		return process.ExitConfig
	}
	// Flags after FILE are the role's own (-redis.addrs=...), as on its
	// command line.
	err := config.Parse(cfg, config.Options{Name: *role, Args: append([]string{"-config", file}, fs.Args()[1:]...),
		Environ: os.Environ(), Output: stderr})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return process.ExitConfig
	}
	if err := config.Validate(cfg); err != nil {
		// As process.Main prints a failed start.
		fmt.Fprintf(stderr, "%s: %v\n", *role, err)
		return process.ExitConfig
	}
	fmt.Fprintf(stdout, "%s: valid configuration of %s\n", file, *role)
	return 0
}

// verbsUsage is what -help prints before the knobs: the verbs, then how
// the service itself is run.
const verbsUsage = `Usage:
  danmaku [-config FILE] [-<section>.<key>=value ...]
        run logic, job and comet in one process (the flags below)
  danmaku token -uid ID [-name NAME] [-rooms R1,R2] [-roles moderator,priority] [-ttl 1h] [-config FILE | -key PRIVATE.pem]
        mint a JWT the servers accept
  danmaku config init [-auth jwt|off] [-force] DIR
        write configs for the role binaries with fresh matching secrets
  danmaku config check [-role logic|job|comet|danmaku] FILE
        validate a configuration file as its role would, without starting it
"danmaku token -help" and "danmaku config check -help" list a verb's flags.

`

// help prints the verbs and then every knob of the all-in-one binary to
// w when args ask for help (-h, -help, --help), and reports whether they
// did; a flag error before the help flag is left to the normal start.
func help(args, environ []string, w io.Writer) bool {
	asked := false
	for _, a := range args {
		switch a {
		case "-h", "-help", "--h", "--help":
			asked = true
		}
	}
	if !asked {
		return false
	}
	fmt.Fprint(w, verbsUsage)
	c := DefaultConfig()
	err := config.Parse(&c, config.Options{Name: "danmaku", Args: args, Environ: environ, Output: w})
	return errors.Is(err, flag.ErrHelp)
}

// exitUsage is the status of a flag parsing error: 0 after -help.
func exitUsage(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return process.ExitConfig
}
