// Package procfs answers the two process questions the process-hygiene tests
// ask (is it still running, what did it start) from Linux's /proc.
package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
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
