package kubewait_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/testenv"
)

var (
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	nodes      = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// lines collects what a wait reports.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(s string) { l.mu.Lock(); l.all = append(l.all, s); l.mu.Unlock() }
func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

func held(t *testing.T, c *testenv.Cluster, dyn dynamic.Interface, name string) kubewait.Target {
	t.Helper()
	ctx := context.Background()
	c.CreateYAML(t, ctx, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+", namespace: default, finalizers: [stand-in.krops.io/held]}\n")
	if err := dyn.Resource(configMaps).Namespace("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	return kubewait.Target{Resource: configMaps, Kind: "ConfigMap", Namespace: "default", Name: name}
}

func release(t *testing.T, dyn dynamic.Interface, name string) {
	t.Helper()
	_, err := dyn.Resource(configMaps).Namespace("default").Patch(context.Background(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func TestGoneWaitsForEveryTargetAndSaysWhatIsLeft(t *testing.T) {
	c := testenv.APIServer(t, testenv.ClusterOptions{})
	dyn := dynamic.NewForConfigOrDie(c.Config)
	a, b := held(t, c, dyn, "a"), held(t, c, dyn, "b")
	never := kubewait.Target{Resource: configMaps, Kind: "ConfigMap", Namespace: "default", Name: "never-existed"}

	var got lines
	done := make(chan error, 1)
	go func() {
		_, err := kubewait.Gone(context.Background(), kubewait.Options{Client: dyn, Timeout: time.Minute, Report: got.add}, a, b, never)
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	release(t, dyn, "a")
	select {
	case err := <-done:
		t.Fatalf("the wait ended while b was still there: %v", err)
	case <-time.After(time.Second):
	}
	release(t, dyn, "b")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.String(), "1 of 3 gone; waiting for ConfigMap default/a: deleting") ||
		!strings.Contains(got.String(), "2 of 3 gone; waiting for ConfigMap default/b: deleting") {
		t.Errorf("progress:\n%s", got.String())
	}

	// Time runs out: what is left is named, and only that.
	c2 := held(t, c, dyn, "c")
	left, err := kubewait.Gone(context.Background(), kubewait.Options{Client: dyn, Timeout: time.Second}, c2, never)
	var te *kubewait.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, kubewait.ErrTimeout) || len(left) != 1 || left[0].Target.Name != "c" {
		t.Fatalf("left = %v, err = %v; want c alone and a timeout", left, err)
	}
	// The caller cancels: interrupted, not timed out.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	if _, err := kubewait.Gone(ctx, kubewait.Options{Client: dyn, Timeout: time.Minute}, c2); !errors.Is(err, kubewait.ErrInterrupted) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func TestUntilSeesSeveralSetsTogether(t *testing.T) {
	c := testenv.APIServer(t, testenv.ClusterOptions{})
	dyn := dynamic.NewForConfigOrDie(c.Config)
	ctx := context.Background()
	sets := []kubewait.Set{{Resource: configMaps, Namespace: "default", FieldSelector: "metadata.name=pair"}, {Resource: secrets, Namespace: "default"}}
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- kubewait.Until(ctx, kubewait.Options{Client: dyn, Timeout: time.Minute}, sets, func(s kubewait.Snapshot) (bool, error) {
			calls++
			return len(s[0]) == 1 && len(s[1]) == 1, nil
		})
	}()
	c.CreateYAML(t, ctx, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: default}\n")
	c.CreateYAML(t, ctx, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pair, namespace: default}\n")
	select {
	case err := <-done:
		t.Fatalf("done with one of two sets: %v", err)
	case <-time.After(time.Second):
	}
	c.CreateYAML(t, ctx, "apiVersion: v1\nkind: Secret\nmetadata: {name: pair, namespace: default}\n")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if calls < 2 {
		t.Errorf("check ran %d times; it runs on every change", calls)
	}
	// A check's error ends the wait with it.
	boom := errors.New("boom")
	err := kubewait.Until(ctx, kubewait.Options{Client: dyn, Timeout: time.Minute}, sets, func(kubewait.Snapshot) (bool, error) { return false, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

func TestNodesReadyFollowsTheReadyCondition(t *testing.T) {
	c := testenv.APIServer(t, testenv.ClusterOptions{})
	dyn := dynamic.NewForConfigOrDie(c.Config)
	ctx := context.Background()
	var got lines
	done := make(chan error, 1)
	go func() {
		done <- kubewait.NodesReady(ctx, kubewait.Options{Client: dyn, Timeout: time.Minute, Report: got.add})
	}()
	time.Sleep(300 * time.Millisecond)
	c.CreateYAML(t, ctx, "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
	setReady := func(status, reason string) {
		patch := `{"status":{"conditions":[{"type":"Ready","status":"` + status + `","reason":"` + reason + `","lastHeartbeatTime":"2026-01-01T00:00:00Z","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
		if _, err := dyn.Resource(nodes).Patch(ctx, "n1", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	setReady("False", "KubeletNotReady")
	time.Sleep(300 * time.Millisecond)
	setReady("True", "KubeletReady")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"no nodes yet", "0 of 1 nodes Ready; not Ready: n1 (no Ready condition yet)", "0 of 1 nodes Ready; not Ready: n1 (False, KubeletNotReady)"} {
		if !strings.Contains(got.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, got.String())
		}
	}
	// Timeout with a node not Ready: the last summary comes back.
	setReady("False", "KubeletNotReady")
	err := kubewait.NodesReady(ctx, kubewait.Options{Client: dyn, Timeout: time.Second})
	var nt *kubewait.NodesTimeoutError
	if !errors.As(err, &nt) || !errors.Is(err, kubewait.ErrTimeout) || nt.Last.String() != "0 of 1 nodes Ready; not Ready: n1 (False, KubeletNotReady)" {
		t.Fatalf("err = %v", err)
	}
}

// A server that accepts and never answers is not a cluster without nodes:
// the wait says nobody answered.
func TestAWaitOnAClusterThatNeverAnswersSaysSo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	dyn := dynamic.NewForConfigOrDie(&rest.Config{Host: "http://" + ln.Addr().String(), Timeout: 5 * time.Second})
	err = kubewait.NodesReady(context.Background(), kubewait.Options{Client: dyn, Timeout: time.Second})
	var na *kubewait.NoAnswerError
	if !errors.As(err, &na) || !strings.Contains(err.Error(), "did not answer within 1s") {
		t.Fatalf("err = %v", err)
	}
}
