package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const testPoll = 10 * time.Millisecond

func release(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}

func TestStartSlotsAreSharedAndFreedOnRelease(t *testing.T) {
	dir := t.TempDir()
	a, err := waitForSlot(dir, 2, time.Second, testPoll)
	if err != nil {
		t.Fatal(err)
	}
	b, err := waitForSlot(dir, 2, time.Second, testPoll)
	if err != nil {
		t.Fatalf("the second of two slots: %v", err)
	}
	if a.Name() == b.Name() {
		t.Fatalf("two holders got the same slot %s", a.Name())
	}
	_, err = waitForSlot(dir, 2, 300*time.Millisecond, testPoll)
	if err == nil || !strings.Contains(err.Error(), "the 2 slots") || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("a third start while both slots are held: got %v, want an error naming the slots and their holders", err)
	}
	done := make(chan error, 1)
	go func() {
		c, err := waitForSlot(dir, 2, 10*time.Second, testPoll)
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	release(a)
	if err := <-done; err != nil {
		t.Fatalf("a waiting start did not get the released slot: %v", err)
	}
	b.Close()
	if left, _ := os.ReadDir(filepath.Join(dir, "queue")); len(left) != 0 {
		t.Errorf("tickets left in line: %v", left)
	}
}

// Starts are served in the order they joined the line, however often the
// later ones poll (CI lost a start for ten minutes to polling luck).
func TestStartsAreServedInTheOrderTheyCame(t *testing.T) {
	dir := t.TempDir()
	holder, err := waitForSlot(dir, 1, time.Second, testPoll)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan string, 3)
	for _, who := range []string{"first", "second", "third"} {
		go func() {
			f, err := waitForSlot(dir, 1, 30*time.Second, testPoll)
			if err != nil {
				served <- who + ": " + err.Error()
				return
			}
			served <- who
			time.Sleep(50 * time.Millisecond)
			release(f)
		}()
		// Each joins before the next.
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, _ := liveAhead(filepath.Join(dir, "queue"), "~")
			if n == map[string]int{"first": 1, "second": 2, "third": 3}[who] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never joined the line", who)
			}
			time.Sleep(testPoll)
		}
	}
	release(holder)
	for _, want := range []string{"first", "second", "third"} {
		if got := <-served; got != want {
			t.Fatalf("served %q, want %q next", got, want)
		}
	}
}

// A waiter that died in line (its ticket no longer locked) does not hold
// up the ones behind it.
func TestADeadWaitersTicketIsDropped(t *testing.T) {
	dir := t.TempDir()
	queue := filepath.Join(dir, "queue")
	if err := os.MkdirAll(queue, 0o700); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(queue, "00000000000000000001-1-dead")
	if err := os.WriteFile(dead, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := waitForSlot(dir, 1, time.Second, testPoll)
	if err != nil {
		t.Fatalf("a dead waiter ahead blocked the line: %v", err)
	}
	release(f)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead waiter's ticket is still in line: %v", err)
	}
}
