package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"sync"
	"time"
)

// A worker holds a share of the viewers, in this process or in a child
// process (the tool re-executed with -worker) when one process would run
// out of file descriptors.
type worker interface {
	progress() Progress
	mark() error
	finish() (*PoolResult, error)
}

type localWorker struct {
	pool *Pool
}

func startLocal(ctx context.Context, spec PoolSpec) *localWorker {
	w := &localWorker{pool: NewPool(spec)}
	go w.pool.Open(ctx)
	return w
}

func (w *localWorker) progress() Progress           { return w.pool.Progress() }
func (w *localWorker) mark() error                  { w.pool.Mark(); return nil }
func (w *localWorker) finish() (*PoolResult, error) { return w.pool.Finish(), nil }

// workerMsg is one line a child writes to its stdout.
type workerMsg struct {
	Progress *Progress   `json:"progress,omitempty"`
	Marked   bool        `json:"marked,omitempty"`
	Result   *PoolResult `json:"result,omitempty"`
	Error    string      `json:"error,omitempty"`
}

type remoteWorker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu     sync.Mutex
	last   Progress
	marked chan struct{}
	result chan workerMsg
	exited chan struct{}
}

// startRemote runs exe with -worker and hands it spec on stdin.
func startRemote(exe string, spec PoolSpec) (*remoteWorker, error) {
	cmd := exec.Command(exe, "-worker")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	w := &remoteWorker{cmd: cmd, stdin: stdin, marked: make(chan struct{}, 1),
		result: make(chan workerMsg, 1), exited: make(chan struct{})}
	if err := json.NewEncoder(stdin).Encode(spec); err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("worker spec: %w", err)
	}
	go func() {
		defer close(w.exited)
		dec := json.NewDecoder(bufio.NewReaderSize(stdout, 1<<20))
		for {
			var m workerMsg
			if err := dec.Decode(&m); err != nil {
				cmd.Wait()
				return
			}
			switch {
			case m.Progress != nil:
				w.mu.Lock()
				w.last = *m.Progress
				w.mu.Unlock()
			case m.Marked:
				w.marked <- struct{}{}
			case m.Result != nil || m.Error != "":
				w.result <- m
			}
		}
	}()
	return w, nil
}

func (w *remoteWorker) progress() Progress {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

func (w *remoteWorker) mark() error {
	if _, err := io.WriteString(w.stdin, "mark\n"); err != nil {
		return err
	}
	select {
	case <-w.marked:
		return nil
	case <-w.exited:
		return errors.New("worker exited")
	case <-time.After(10 * time.Second):
		return errors.New("worker did not confirm mark")
	}
}

func (w *remoteWorker) finish() (*PoolResult, error) {
	defer func() {
		w.stdin.Close()
		select {
		case <-w.exited:
		case <-time.After(10 * time.Second):
			w.cmd.Process.Kill()
		}
	}()
	if _, err := io.WriteString(w.stdin, "finish\n"); err != nil {
		return nil, err
	}
	select {
	case m := <-w.result:
		if m.Error != "" {
			return nil, errors.New(m.Error)
		}
		return m.Result, nil
	case <-w.exited:
		return nil, errors.New("worker exited without a result")
	case <-time.After(2 * time.Minute):
		return nil, errors.New("worker result timed out")
	}
}

// RunWorker is the child side: it reads a PoolSpec and then the commands
// "mark" and "finish" from in, and writes progress lines and the result to
// out. It returns when in ends or after finish.
func RunWorker(ctx context.Context, in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	var spec PoolSpec
	if err := json.Unmarshal(line, &spec); err != nil {
		return fmt.Errorf("decode spec: %w", err)
	}
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var outMu sync.Mutex
	enc := json.NewEncoder(out)
	send := func(m workerMsg) {
		outMu.Lock()
		defer outMu.Unlock()
		enc.Encode(m)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pool := NewPool(spec)
	go pool.Open(ctx)
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p := pool.Progress()
				send(workerMsg{Progress: &p})
			}
		}
	}()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil // parent gone
		}
		switch line {
		case "mark\n":
			pool.Mark()
			send(workerMsg{Marked: true})
		case "finish\n":
			cancel()
			res := pool.Finish()
			send(workerMsg{Result: res})
			return nil
		}
	}
}
