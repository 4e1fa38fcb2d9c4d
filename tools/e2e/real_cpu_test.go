//go:build realengine

package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk/procfs"
)

// procKey names a process across samples: a pid alone may be reused.
type procKey struct {
	pid   int
	start uint64
}

// procSample is a process of a task run as its last sample saw it.
type procSample struct {
	parent procKey
	label  string
	// self is its own CPU; reaped the CPU of the children it waited for.
	self, reaped time.Duration
}

// cpuLedger says where the CPU a task run's processes used went, program by
// program: the rusage of `task` (what the lane reports as krops's share)
// is one number, and lowering it needs to know whether it is the build,
// a binary's own work, or the docker or kubectl calls it makes. It samples
// /proc twice a second for the processes below every `task` the test
// started; a child too short-lived for any sample is still counted, in the
// CPU its parent reaped, as "<parent> (children no sample saw)". Reading /proc is
// Linux's (plugins/sdk/procfs), as is the real-engine lane.
type cpuLedger struct {
	self int

	mu    sync.Mutex
	procs map[procKey]*procSample
	stop  chan struct{}
	done  chan struct{}
}

// startCPULedger samples until stopped.
func startCPULedger(t *testing.T) *cpuLedger {
	t.Helper()
	l := &cpuLedger{self: os.Getpid(), procs: map[procKey]*procSample{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		every := time.NewTicker(500 * time.Millisecond)
		defer every.Stop()
		for {
			l.sample()
			select {
			case <-l.stop:
				return
			case <-every.C:
			}
		}
	}()
	t.Cleanup(l.halt)
	return l
}

func (l *cpuLedger) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// programOf names a process by its program: the script a shell runs, the go
// subcommand, the docker or kubectl verb.
func programOf(pid int) string {
	argv := procfs.Argv(pid)
	if len(argv) == 0 {
		return "?"
	}
	name := filepath.Base(argv[0])
	verb := func() string {
		for _, a := range argv[1:] {
			if !strings.HasPrefix(a, "-") {
				return name + " " + a
			}
		}
		return name
	}
	switch name {
	case "bash", "sh", "env":
		if len(argv) > 1 && strings.HasPrefix(argv[1], "-") {
			return name + " " + argv[1]
		}
		if len(argv) > 1 {
			return filepath.Base(argv[1])
		}
	case "go", "docker", "kubectl":
		return verb()
	}
	return name
}

func (l *cpuLedger) sample() {
	byPID := map[int]procfs.Process{}
	children := map[int][]int{}
	for _, p := range procfs.Snapshot() {
		byPID[p.PID] = p
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	// The task runs the test started, and everything below them.
	var queue []int
	for _, pid := range children[l.self] {
		if programOf(pid) == "task" {
			queue = append(queue, pid)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		st := byPID[pid]
		key := procKey{pid, st.Start}
		p := l.procs[key]
		if p == nil {
			p = &procSample{label: programOf(pid)}
			if parent, ok := byPID[st.PPID]; ok && st.PPID != l.self {
				p.parent = procKey{parent.PID, parent.Start}
			}
			l.procs[key] = p
		}
		p.self, p.reaped = st.CPU, st.Reaped
		queue = append(queue, children[pid]...)
	}
}

// cpuSplit is a task run's CPU by what it was for.
type cpuSplit struct {
	// build is tools/scripts/build.sh and everything below it: every task
	// starts with it, and after a change of version or source it relinks
	// the binaries, once.
	build time.Duration
	// programs is the rest: task, krops's binaries, their plugins and the
	// docker or kubectl calls they make.
	programs time.Duration
	// unsampled is what no sample saw: the last half second of a process,
	// children of processes that ended between samples.
	unsampled time.Duration
	// by is each program's part, largest first, as lines.
	by []string
}

// report breaks total (the rusage of the task runs) down by program.
func (l *cpuLedger) report(total time.Duration) cpuSplit {
	l.halt()
	l.mu.Lock()
	defer l.mu.Unlock()
	// known is what the samples tell of a process and everything below
	// it: its own time, and its children's as it reaped them or, where
	// its last sample came before it reaped them, as they were seen.
	children := map[procKey][]procKey{}
	for k, p := range l.procs {
		if p.parent != (procKey{}) {
			children[p.parent] = append(children[p.parent], k)
		}
	}
	memo := map[procKey]time.Duration{}
	var known func(procKey) time.Duration
	known = func(k procKey) time.Duration {
		if d, ok := memo[k]; ok {
			return d
		}
		var below time.Duration
		for _, c := range children[k] {
			below += known(c)
		}
		p := l.procs[k]
		memo[k] = p.self + max(p.reaped, below)
		return memo[k]
	}
	seenOfChildren := map[procKey]time.Duration{}
	for k := range l.procs {
		for _, c := range children[k] {
			seenOfChildren[k] += known(c)
		}
	}
	underBuild := func(k procKey) bool {
		for hops := 0; hops < 64; hops++ {
			p := l.procs[k]
			if p == nil {
				return false
			}
			if p.label == "build.sh" {
				return true
			}
			k = p.parent
		}
		return false
	}
	var split cpuSplit
	by := map[string]time.Duration{}
	count := map[string]int{}
	for k, p := range l.procs {
		own := p.self
		by[p.label] += p.self
		count[p.label]++
		if short := p.reaped - seenOfChildren[k]; short > 0 {
			by[p.label+" (children no sample saw)"] += short
			own += short
		}
		if underBuild(k) {
			split.build += own
		} else {
			split.programs += own
		}
	}
	if rest := total - split.build - split.programs; rest > 0 {
		split.unsampled = rest
		by["not sampled (the last half second of a process, children of short-lived ones)"] = rest
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return by[names[i]] > by[names[j]] })
	for _, n := range names {
		if by[n] < 100*time.Millisecond {
			continue
		}
		procs := ""
		if c := count[n]; c > 0 {
			procs = fmt.Sprintf(" (%d processes)", c)
		}
		split.by = append(split.by, fmt.Sprintf("  %6.1fs %5.1f%%  %s%s", by[n].Seconds(), 100*by[n].Seconds()/total.Seconds(), n, procs))
	}
	return split
}

// TestCPULedgerChargesEachProgram runs a `task` that starts a build.sh
// with a burner below it, a long CPU burner and many short ones, and checks
// the ledger charges the build's burner to the build, the long one by its
// script's name and the short ones to their parent, and that what it
// attributes adds up to the rusage the lane reports.
func TestCPULedgerChargesEachProgram(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/usr/bin/env bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The burners count, so their CPU is the same however loaded the
	// machine is (about 1.7 s on one of these cores); short.sh starts 40
	// shells of a few milliseconds each, too short for a sample to see.
	burn := `for ((i=0;i<1500000;i++)); do :; done`
	write("burn.sh", burn)
	write("short.sh", `for i in $(seq 40); do bash -c 'for j in $(seq 3000); do :; done'; done`)
	write("build.sh", `bash -c '`+burn+`'`)
	write("task", `bash "$(dirname "$0")/build.sh"; bash "$(dirname "$0")/burn.sh"; bash "$(dirname "$0")/short.sh"`)
	l := startCPULedger(t)
	cmd := exec.Command(filepath.Join(dir, "task"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	total := cpu(cmd.ProcessState)
	split := l.report(total)
	report := strings.Join(split.by, "\n")
	t.Logf("total %v (build %v, programs %v, unsampled %v):\n%s", total, split.build, split.programs, split.unsampled, report)
	l.mu.Lock()
	defer l.mu.Unlock()
	by := map[string]time.Duration{}
	for _, p := range l.procs {
		by[p.label] += p.self
	}
	// Each burner loses at most the half second after its last sample.
	if by["burn.sh"] < total/5 {
		t.Errorf("burn.sh charged %v of %v, want about a third", by["burn.sh"], total)
	}
	// build.sh's burner is a child of it: charged to the build, and the
	// same work as burn.sh's.
	if split.build < by["burn.sh"]/2 || split.build > total-by["burn.sh"] {
		t.Errorf("the build charged %v of %v (burn.sh, the same work: %v)", split.build, total, by["burn.sh"])
	}
	if !strings.Contains(report, "short.sh (children no sample saw)") {
		t.Errorf("the short-lived shells are not charged to short.sh:\n%s", report)
	}
	if split.build+split.programs < total/2 {
		t.Errorf("the samples saw %v of %v", split.build+split.programs, total)
	}
}
