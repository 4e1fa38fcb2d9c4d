package testenv

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartSlotsAreSharedAndFreedOnRelease(t *testing.T) {
	dir := t.TempDir()
	a, err := waitForSlot(dir, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := waitForSlot(dir, 2, time.Second)
	if err != nil {
		t.Fatalf("the second of two slots: %v", err)
	}
	if a.Name() == b.Name() {
		t.Fatalf("two holders got the same slot %s", a.Name())
	}
	_, err = waitForSlot(dir, 2, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "all 2 slots") {
		t.Fatalf("a third start while both slots are held: got %v, want an error naming the slots", err)
	}
	done := make(chan error, 1)
	go func() {
		c, err := waitForSlot(dir, 2, 10*time.Second)
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	_ = syscall.Flock(int(a.Fd()), syscall.LOCK_UN)
	a.Close()
	if err := <-done; err != nil {
		t.Fatalf("a waiting start did not get the released slot: %v", err)
	}
	b.Close()
}
