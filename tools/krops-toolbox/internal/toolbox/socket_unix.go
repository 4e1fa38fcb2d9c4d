//go:build unix

package toolbox

import (
	"os"
	"syscall"
)

// socketGroup is the group owning the engine socket on the host.
func socketGroup(path string) (int, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(sys.Gid), true
}
