package kubewait_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/testenv"
)

// pausable forwards TCP to an API server and, paused, stops moving bytes
// while keeping every connection open: what a paused container looks like
// to a client (the real-engine lane pauses kind's node during a teardown).
type pausable struct {
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	addr   string
}

func newPausable(t *testing.T, upstream string) *pausable {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pausable{addr: ln.Addr().String()}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() { ln.Close(); p.set(false) })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", upstream)
			if err != nil {
				in.Close()
				continue
			}
			go p.pipe(out, in)
			go p.pipe(in, out)
		}
	}()
	return p
}

func (p *pausable) set(paused bool) {
	p.mu.Lock()
	p.paused = paused
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *pausable) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.paused {
			p.cond.Wait()
		}
		p.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: dst closes with it
		}
	}
}

// A wait whose API server goes silent after answering (a watch on it gets
// neither events nor errors) ends with a *SilentError once Silence has
// passed, instead of looking like a long wait until its own timeout.
func TestAWaitWhoseServerGoesSilentSaysSo(t *testing.T) {
	c := testenv.APIServer(t, testenv.ClusterOptions{Name: "silence"})
	direct := dynamic.NewForConfigOrDie(c.Config)
	target := held(t, c, direct, "held")
	p := newPausable(t, strings.TrimSuffix(strings.TrimPrefix(c.Config.Host, "https://"), "/"))
	cfg := rest.CopyConfig(c.Config)
	cfg.Host = "https://" + p.addr
	dyn := dynamic.NewForConfigOrDie(cfg)

	var seen lines
	reported := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := kubewait.Gone(context.Background(), kubewait.Options{Client: dyn, Timeout: 2 * time.Minute, Silence: 2 * time.Second,
			Report: func(l string) {
				seen.add(l)
				select {
				case reported <- struct{}{}:
				default:
				}
			}}, target)
		done <- err
	}()
	select {
	case <-reported:
	case err := <-done:
		t.Fatalf("the wait ended before the pause: %v (%s)", err, &seen)
	}
	p.set(true)
	err := <-done
	var se *kubewait.SilentError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "the API server stopped answering (no answer for 2s)") {
		t.Fatalf("err = %v, want a *SilentError (reported: %s)", err, &seen)
	}
	if errors.Is(err, kubewait.ErrTimeout) {
		t.Errorf("a silent server is not a timeout: %v", err)
	}

	// While the server answers, Silence changes nothing: the wait ends when
	// the target goes.
	p.set(false)
	go func() {
		_, err := kubewait.Gone(context.Background(), kubewait.Options{Client: dyn, Timeout: 2 * time.Minute, Silence: 2 * time.Second}, target)
		done <- err
	}()
	time.Sleep(5 * time.Second) // longer than Silence, with probes answered
	release(t, direct, "held")
	if err := <-done; err != nil {
		t.Fatalf("a wait on an answering server: %v", err)
	}
}

// All, the wait for objects to appear or become Ready, ends on a silent
// server the same way; on an answering one Silence changes nothing.
func TestAllEndsWhenItsServerGoesSilent(t *testing.T) {
	c := testenv.APIServer(t, testenv.ClusterOptions{Name: "silence-all"})
	p := newPausable(t, strings.TrimSuffix(strings.TrimPrefix(c.Config.Host, "https://"), "/"))
	cfg := rest.CopyConfig(c.Config)
	cfg.Host = "https://" + p.addr
	dyn := dynamic.NewForConfigOrDie(cfg)
	later := kubewait.Target{Resource: configMaps, Kind: "ConfigMap", Namespace: "default", Name: "later", Exists: true}

	done := make(chan error, 1)
	go func() {
		done <- kubewait.All(context.Background(), kubewait.Options{Client: dyn, Timeout: 2 * time.Minute, Silence: 2 * time.Second}, later)
	}()
	// Nothing changes while the object is missing, so nothing is reported:
	// the pause comes once the wait has listed and watches.
	select {
	case <-time.After(3 * time.Second):
	case err := <-done:
		t.Fatalf("the wait ended before the pause: %v", err)
	}
	p.set(true)
	err := <-done
	var se *kubewait.SilentError
	if !errors.As(err, &se) || errors.Is(err, kubewait.ErrTimeout) {
		t.Fatalf("err = %v, want a *SilentError", err)
	}

	p.set(false)
	go func() {
		done <- kubewait.All(context.Background(), kubewait.Options{Client: dyn, Timeout: 2 * time.Minute, Silence: 2 * time.Second}, later)
	}()
	time.Sleep(5 * time.Second) // longer than Silence, with probes answered
	c.CreateYAML(t, context.Background(), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: later, namespace: default}\n")
	if err := <-done; err != nil {
		t.Fatalf("a wait on an answering server: %v", err)
	}
}
