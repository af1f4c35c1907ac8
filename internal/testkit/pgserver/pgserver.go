// Package pgserver starts real PostgreSQL servers for tests: Debian's
// postgresql binaries (initdb, postgres under /usr/lib/postgresql/*/bin),
// a data directory in a temporary directory and a free loopback port. As
// root the server runs as the postgres user (PostgreSQL refuses root). A
// missing installation fails the test, never skips it (.ci/run installs
// the postgresql package).
//
//	srv := pgserver.Start(t)      // stopped when t ends
//	db := srv.DSN("danmaku")      // a database of that name, created on first use
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one postgres process over its own data directory.
type Server struct {
	Addr string // 127.0.0.1:port
	dir  string // data directory
	bin  string // directory of the binaries
	cred *syscall.Credential

	mu  sync.Mutex // guards cmd
	cmd *exec.Cmd
}

// BinDir returns the directory holding initdb and postgres, the newest
// major version installed.
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL not installed: no /usr/lib/postgresql/*/bin/initdb (Debian: apt-get install postgresql)")
}

func majorOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start initialises a cluster in a temporary directory and starts it on a
// free port; the server is stopped and its files removed when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := New()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Remove)
	if err := s.Start(); err != nil {
		tb.Fatal(err)
	}
	return s
}

// New initialises a data directory (initdb, trust authentication, user
// danmaku) without starting the server.
func New() (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "danmaku-pg-")
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Addr: addr, dir: filepath.Join(dir, "data"), bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs the postgres user to start PostgreSQL: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	cmd := s.command("initdb", "-D", s.dir, "-U", "danmaku", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	return s, nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	// A group of its own: Kill takes the backends with the postmaster.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	cmd.Dir = filepath.Dir(s.dir)
	return cmd
}

// Start starts the server (again, after Stop or Kill) and waits until it
// accepts connections.
func (s *Server) Start() error {
	_, port, _ := splitAddr(s.Addr)
	cmd := s.command("postgres", "-D", s.dir, "-p", port, "-k", filepath.Dir(s.dir),
		// fsync off: a killed server keeps what it committed (the WAL is in
		// the page cache); only a machine crash would lose it. Commits stay
		// synchronous, so Kill loses no committed transaction.
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=64MB")
	log, err := os.Create(filepath.Join(filepath.Dir(s.dir), "postgres.log"))
	if err != nil {
		return err
	}
	if s.cred != nil {
		os.Chown(log.Name(), int(s.cred.Uid), int(s.cred.Gid))
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	log.Close()
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.dsn("postgres"))
		cancel()
		if err == nil {
			c.Close(context.Background())
			go func() { <-done }()
			return nil
		}
		select {
		case werr := <-done:
			b, _ := os.ReadFile(log.Name())
			return fmt.Errorf("postgres exited: %v: %s", werr, b)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres on %s not ready: %w", s.Addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop shuts the server down fast (SIGINT: connections are closed, the
// data is flushed) and waits for it.
func (s *Server) Stop() { s.signal(syscall.SIGINT) }

// Kill kills the server (SIGKILL): it restarts with crash recovery.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	pgid := cmd.Process.Pid
	if sig == syscall.SIGKILL {
		syscall.Kill(-pgid, sig) // the postmaster and its backends at once
	} else {
		cmd.Process.Signal(sig)
	}
	// Wait until no process of the group is left, so the port and the
	// data directory are free for the next Start.
	for i := 0; i < 1500 && syscall.Kill(-pgid, 0) == nil; i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

// Remove stops the server and removes its files.
func (s *Server) Remove() {
	s.Stop()
	os.RemoveAll(filepath.Dir(s.dir))
}

// DSN returns the URL of database name on the server, creating the
// database on first use.
func (s *Server) DSN(tb testing.TB, name string) string {
	tb.Helper()
	if err := s.CreateDB(name); err != nil {
		tb.Fatal(err)
	}
	return s.dsn(name)
}

// CreateDB creates database name unless it exists.
func (s *Server) CreateDB(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) dsn(db string) string {
	return "postgres://danmaku@" + s.Addr + "/" + db + "?sslmode=disable"
}

func splitAddr(a string) (host, port string, err error) {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] == ':' {
			return a[:i], a[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("no port in %q", a)
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
	dbSeq     int
)

// Run runs the tests of a package and stops the server Shared started.
//
//	func TestMain(m *testing.M) { os.Exit(pgserver.Run(m)) }
func Run(m *testing.M) int {
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Remove()
		shared = nil
	}
	return code
}

// Shared returns the server shared by the tests of this process, started
// on first use (stopped by Run).
func Shared(tb testing.TB) *Server {
	tb.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		s, err := New()
		if err == nil {
			if err = s.Start(); err != nil {
				s.Remove()
			}
		}
		shared, sharedErr = s, err
		if err != nil {
			shared = nil
		}
	}
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return shared
}

// FreshDSN returns the URL of a new, empty database on the shared server.
func FreshDSN(tb testing.TB) string {
	tb.Helper()
	s := Shared(tb)
	sharedMu.Lock()
	dbSeq++
	name := fmt.Sprintf("t%d_%d", os.Getpid()%100000, dbSeq)
	sharedMu.Unlock()
	return s.DSN(tb, name)
}
