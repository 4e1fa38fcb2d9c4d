package kubewait_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/testenv"
)

// A wait whose API server goes silent after answering (a watch on it gets
// neither events nor errors) ends with a *SilentError once Silence has
// passed, instead of looking like a long wait until its own timeout.
func TestAWaitWhoseServerGoesSilentSaysSo(t *testing.T) {
	c := testenv.APIServer(t, testenv.ClusterOptions{Name: "silence"})
	direct := dynamic.NewForConfigOrDie(c.Config)
	target := held(t, c, direct, "held")
	p := testenv.NewPausable(t, c.Config)
	cfg := p.Config()
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
	p.Pause(true)
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
	p.Pause(false)
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
	p := testenv.NewPausable(t, c.Config)
	cfg := p.Config()
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
	p.Pause(true)
	err := <-done
	var se *kubewait.SilentError
	if !errors.As(err, &se) || errors.Is(err, kubewait.ErrTimeout) {
		t.Fatalf("err = %v, want a *SilentError", err)
	}

	p.Pause(false)
	go func() {
		done <- kubewait.All(context.Background(), kubewait.Options{Client: dyn, Timeout: 2 * time.Minute, Silence: 2 * time.Second}, later)
	}()
	time.Sleep(5 * time.Second) // longer than Silence, with probes answered
	c.CreateYAML(t, context.Background(), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: later, namespace: default}\n")
	if err := <-done; err != nil {
		t.Fatalf("a wait on an answering server: %v", err)
	}
}
