//go:build !linux

package procfs

import "errors"

// BecomeSubreaper is Linux only.
func BecomeSubreaper() error { return errors.New("child subreaper: Linux only") }
