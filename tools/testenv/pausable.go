package testenv

import (
	"net"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// Pausable forwards TCP to an API server and, paused, stops moving bytes
// while keeping every connection open: what a paused or frozen node
// container looks like to a client (the real-engine lane pauses one during
// a teardown). It is how a test makes an API server go silent without
// stopping it.
type Pausable struct {
	mu       sync.Mutex
	cond     *sync.Cond
	paused   bool
	addr     string
	upstream *rest.Config
}

// NewPausable listens on loopback in front of cfg's API server until the
// test ends.
func NewPausable(t testing.TB, cfg *rest.Config) *Pausable {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := strings.TrimSuffix(strings.TrimPrefix(cfg.Host, "https://"), "/")
	p := &Pausable{addr: ln.Addr().String(), upstream: cfg}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() { ln.Close(); p.Pause(false) })
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

// Config is the upstream's client configuration pointed at the forwarder
// (the API server's certificate names 127.0.0.1, so TLS still verifies).
func (p *Pausable) Config() *rest.Config {
	cfg := rest.CopyConfig(p.upstream)
	cfg.Host = "https://" + p.addr
	return cfg
}

// Pause stops (true) or resumes (false) every byte in both directions.
func (p *Pausable) Pause(paused bool) {
	p.mu.Lock()
	p.paused = paused
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *Pausable) pipe(dst, src net.Conn) {
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
