package procfs

import "syscall"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from linux/prctl.h.
const prSetChildSubreaper = 36

// BecomeSubreaper makes the calling process the parent of every orphan
// among its descendants, so a test can see a plugin's child that its
// plugin left behind (Descendants) instead of losing it to init.
func BecomeSubreaper() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
