package proc

import (
	"bytes"
	"sync"
)

// Buffer collects output written from other goroutines (a child process's
// pipes, a plugin's log relay) and may be read at any time, including after
// the test ended, when t.Log would panic.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
