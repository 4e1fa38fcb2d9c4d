// Package procfs answers process questions (is it still running, what did
// it start, what does it run) from Linux's /proc, for the process-hygiene
// tests and for stopping the engine commands kind starts. Elsewhere it
// finds nothing.
package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// stat returns the fields of /proc/<pid>/stat after the command name,
// which may itself hold spaces or parentheses: [state, ppid, ...].
func stat(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndex(s, ")")+1:]), true
}

// Alive reports whether pid runs. A zombie waiting for its reaper counts
// as gone: it holds no memory, ports or files.
func Alive(pid int) bool {
	f, ok := stat(pid)
	return ok && len(f) > 0 && f[0] != "Z"
}

// Children lists the processes whose parent is pid.
func Children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	parent := strconv.Itoa(pid)
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := stat(child); ok && len(f) > 1 && f[1] == parent {
			out = append(out, child)
		}
	}
	return out
}

// Descendants lists every live process below pid: children, theirs, and so
// on. Orphans are found only when pid is their subreaper (see
// BecomeSubreaper); otherwise they belong to init.
func Descendants(pid int) []int {
	var out []int
	queue := Children(pid)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if Alive(p) {
			out = append(out, p)
		}
		queue = append(queue, Children(p)...)
	}
	return out
}

// Cmdline is the argv of pid joined by spaces, or "" when it is gone.
func Cmdline(pid int) string { return strings.Join(Argv(pid), " ") }

// Argv is the argv of pid, or nil when it is gone.
func Argv(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// userHZ is the unit of the times in /proc/<pid>/stat: the kernel reports
// them in USER_HZ ticks, 100 a second on every architecture Go runs on.
const userHZ = 100

// Process is one process as Snapshot read it.
type Process struct {
	PID, PPID int
	// Start is when it started, in ticks since boot: with PID it names a
	// process across snapshots, since pids are reused.
	Start uint64
	// CPU is the user and system time it used so far; Reaped is that of
	// the children it has waited for.
	CPU, Reaped time.Duration
}

// Snapshot reads every process once: one pass over /proc, for callers that
// follow many processes over time (a scan per process would read /proc
// once for each).
func Snapshot() []Process {
	entries, _ := os.ReadDir("/proc")
	out := make([]Process, 0, len(entries))
	tick := func(f []string, i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// Fields from the state (stat's third): ppid 1, utime 11, stime
		// 12, cutime 13, cstime 14, starttime 19.
		f, ok := stat(pid)
		if !ok || len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out = append(out, Process{PID: pid, PPID: ppid, Start: tick(f, 19),
			CPU:    time.Duration(tick(f, 11)+tick(f, 12)) * time.Second / userHZ,
			Reaped: time.Duration(tick(f, 13)+tick(f, 14)) * time.Second / userHZ})
	}
	return out
}

// Comm is the name of the file pid executes (at most 15 bytes), or "" when
// it is gone. Unlike argv[0] it names a script, not its interpreter.
func Comm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Leftovers waits up to d for every descendant of the calling process to
// go and returns those that did not.
func Leftovers(d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		left := Descendants(os.Getpid())
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}
