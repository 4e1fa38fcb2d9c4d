package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"
)

// pipeGrace is how long the host keeps reading a plugin's stdout and stderr
// after the plugin itself has exited. Output still buffered arrives well
// within it; a descendant that inherited the pipes and outlived the group
// kill does not get to hold the host any longer than this.
const pipeGrace = 300 * time.Millisecond

// groupRunner runs a plugin in a process group of its own. go-plugin's
// default runner waits for EOF on the plugin's pipes before it reaps the
// process, so any child of the plugin that inherited them held the host
// (and every Ctrl-C) until that child chose to exit. This runner kills the
// whole group whenever the plugin goes, and stops reading the pipes shortly
// after the plugin has exited whoever still holds them.
type groupRunner struct {
	path string
	cmd  *exec.Cmd
	// check runs right before exec (the pin is verified again there, as
	// close to exec as the host can get).
	check func() error

	stdout, stderr *pipeReader
	tail           *tailBuffer

	mu      sync.Mutex
	pid     int
	started bool
	// stopped is set by stop: a runner stopped before Start never starts.
	stopped bool

	exited  chan struct{}
	waitErr error
	state   *os.ProcessState
}

// launches are the plugins this process started, for KillPlugins: a
// process-wide list like go-plugin's own list of managed clients.
var launches sync.Map // *launch -> struct{}

// KillPlugins kills the process group of every plugin this process
// started, at once and without the graceful close CleanupClients tries
// first: for a forced exit (a second Ctrl-C), where nothing may wait.
func KillPlugins() {
	launches.Range(func(k, _ any) bool {
		k.(*launch).stop()
		return true
	})
}

// launch hands the runner go-plugin creates back to Load, which needs it to
// stop a handshake on interrupt and to explain a plugin that died early.
type launch struct {
	mu      sync.Mutex
	r       *groupRunner
	stopped bool
}

func (l *launch) set(r *groupRunner) {
	launches.Store(l, struct{}{})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.r = r
	if l.stopped {
		r.stop()
	}
}

func (l *launch) runner() *groupRunner {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r
}

// stop kills the plugin's group, or makes sure it never starts.
func (l *launch) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.r != nil {
		l.r.stop()
	}
}

// runnerFunc is the plugin.ClientConfig.RunnerFunc for the executable at
// path. spec carries go-plugin's environment (handshake cookie, protocol
// versions, socket directory); base is the rest of the plugin's environment.
func runnerFunc(l *launch, path string, base []string, check func() error) func(hclog.Logger, *exec.Cmd, string) (runner.Runner, error) {
	return func(_ hclog.Logger, spec *exec.Cmd, _ string) (runner.Runner, error) {
		cmd := exec.Command(path)
		cmd.Env = append(append([]string{}, base...), spec.Env...)
		// A plugin reads nothing from the terminal; its own group keeps the
		// terminal's Ctrl-C for the host, which decides when plugins stop.
		cmd.Stdin = nil
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		r := &groupRunner{path: path, cmd: cmd, check: check, tail: &tailBuffer{max: 4096}, exited: make(chan struct{})}
		l.set(r)
		return r, nil
	}
}

func (r *groupRunner) Start(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return context.Canceled
	}
	if r.check != nil {
		if err := r.check(); err != nil {
			return err
		}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	// *os.File outputs: exec hands the descriptors over and starts no
	// copying goroutines that Wait would block on.
	r.cmd.Stdout, r.cmd.Stderr = outW, errW
	err = r.cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	r.started = true
	r.pid = r.cmd.Process.Pid
	r.stdout = newPipeReader(outR, nil)
	r.stderr = newPipeReader(errR, r.tail)
	go r.reap()
	return nil
}

// reap waits for the plugin, kills what is left of its group, and after a
// short grace ends the reads of its pipes.
func (r *groupRunner) reap() {
	err := r.cmd.Wait()
	r.mu.Lock()
	r.waitErr, r.state = err, r.cmd.ProcessState
	r.mu.Unlock()
	killGroup(r.pid)
	close(r.exited)
	time.AfterFunc(pipeGrace, func() {
		r.stdout.close()
		r.stderr.close()
	})
}

func (r *groupRunner) stop() {
	r.mu.Lock()
	r.stopped = true
	pid, started := r.pid, r.started
	r.mu.Unlock()
	if started {
		killGroup(pid)
	}
}

// killGroup sends SIGKILL to the process group led by pid. The group
// outlives its leader while any member runs, and the kernel does not hand a
// live group's id to a new process, so the signal reaches only the plugin's
// own descendants (those that did not leave the group on purpose).
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func (r *groupRunner) Wait(ctx context.Context) error {
	select {
	case <-r.exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waitErr
}

func (r *groupRunner) Kill(context.Context) error {
	r.stop()
	return nil
}

func (r *groupRunner) Stdout() io.ReadCloser { return r.stdout }
func (r *groupRunner) Stderr() io.ReadCloser { return r.stderr }
func (r *groupRunner) Name() string          { return r.path }

func (r *groupRunner) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pid == 0 {
		return ""
	}
	return strconv.Itoa(r.pid)
}

func (r *groupRunner) Diagnose(context.Context) string { return "" }

func (r *groupRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (r *groupRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// exitedEarly says how the plugin ended if it has, waiting at most d for a
// plugin whose stdout closed a moment before the kernel reported its exit.
func (r *groupRunner) exitedEarly(d time.Duration) (string, bool) {
	select {
	case <-r.exited:
	case <-time.After(d):
		return "", false
	}
	r.mu.Lock()
	st, stopped := r.state, r.stopped
	r.mu.Unlock()
	if st == nil {
		return "it exited", true
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return fmt.Sprintf("it exited with code %d", st.ExitCode()), true
	}
	// The wait status, not the order of events, says who ended it: the
	// host's stop and a plugin dying on its own race by microseconds.
	if stopped && ws.Signal() == syscall.SIGKILL {
		return "", false
	}
	return fmt.Sprintf("it was killed by signal %v", ws.Signal()), true
}

// stderrTail is the last n lines the plugin wrote to stderr, once the host
// has read all of it (go-plugin reads stderr on a goroutine of its own).
func (r *groupRunner) stderrTail(n int) []string {
	select {
	case <-r.stderr.ended:
	case <-time.After(2 * pipeGrace):
	}
	return r.tail.lines(n)
}

// Pid is the plugin's process id, 0 before it started.
func (r *groupRunner) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pid
}

// pipeReader reads one of the plugin's pipes until EOF or until the runner
// closes it, which the reader reports as EOF: a cut-off pipe is the end of
// the plugin's output, not an error to log.
type pipeReader struct {
	f    *os.File
	tee  *tailBuffer
	once sync.Once
	// ended is closed when a read has returned the end of the output.
	ended     chan struct{}
	endedOnce sync.Once
}

func newPipeReader(f *os.File, tee *tailBuffer) *pipeReader {
	return &pipeReader{f: f, tee: tee, ended: make(chan struct{})}
}

func (p *pipeReader) Read(b []byte) (int, error) {
	n, err := p.f.Read(b)
	if n > 0 && p.tee != nil {
		p.tee.Write(b[:n])
	}
	if errors.Is(err, os.ErrClosed) {
		err = io.EOF
	}
	if err != nil {
		p.endedOnce.Do(func() { close(p.ended) })
	}
	return n, err
}

func (p *pipeReader) Close() error {
	p.close()
	return nil
}

func (p *pipeReader) close() {
	if p != nil {
		p.once.Do(func() { p.f.Close() })
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) lines(n int) []string {
	t.mu.Lock()
	s := strings.TrimRight(string(t.buf), "\n")
	t.mu.Unlock()
	if s == "" {
		return nil
	}
	all := strings.Split(s, "\n")
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all
}
