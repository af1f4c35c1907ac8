// Command healthcheck is the probe of the container image: the image has no
// shell, curl or wget, so docker-compose's health checks run this binary.
// It GETs each URL and exits 0 when every one answers 2xx in time, 1
// otherwise (the first failure on stderr):
//
//	healthcheck http://127.0.0.1:8090/readyz
//	healthcheck -timeout 2s http://127.0.0.1:8080/healthz http://127.0.0.1:8081/readyz
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

// run probes the URLs of args and returns the exit code.
func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "time allowed for all the URLs together")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: healthcheck [-timeout D] URL...")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	for _, u := range fs.Args() {
		if err := probe(ctx, u); err != nil {
			fmt.Fprintf(stderr, "healthcheck: %s: %v\n", u, err)
			return 1
		}
	}
	return 0
}

// probe GETs u and reports an error unless the answer is 2xx.
func probe(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s", resp.Status, body)
	}
	return nil
}
