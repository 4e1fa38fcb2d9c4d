package teardown

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kropsdev/krops/tools/kit/ui"
)

// webhookRefusal is the error the management cluster's API server returned
// on the real engine to the teardown's rerun, right after its container
// had been paused: Cluster API's managers had lost their leader leases and
// were restarting, so their validating webhook was unreachable.
func webhookRefusal() error {
	return apierrors.NewInternalError(errors.New(`failed calling webhook "validation.cluster.cluster.x-k8s.io": failed to call webhook: ` +
		`Post "https://capi-webhook-service.capi-system.svc:443/validate-cluster-x-k8s-io-v1beta2-cluster?timeout=10s": dial tcp 10.96.12.7:443: connect: connection refused`))
}

// A deletion the API server refused for an unreachable admission webhook
// changed nothing, so it is tried again until the webhook answers or
// AdmissionWait runs out; anything else (the API server itself silent,
// another internal error) is unknown state at once, never retried.
//
// The API server here is client-go's fake dynamic client (a STAND-IN):
// the error's shape is the one a real API server returned on the real
// engine (webhookRefusal), and the real lifecycle lane is where the
// restarting webhooks happen.
func TestDeletionRefusedForAnUnreachableWebhookIsTriedAgain(t *testing.T) {
	clusters := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	for _, c := range []struct {
		name      string
		answers   []error // one per call; the last repeats
		wantCalls int     // exactly, or at least when atLeast
		atLeast   bool
		wantFound bool
		wantErr   string
		wantTold  bool
	}{
		{name: "refused twice, then deleted", answers: []error{webhookRefusal(), webhookRefusal(), nil}, wantCalls: 3, wantFound: true, wantTold: true},
		{name: "refused twice, then already gone", answers: []error{webhookRefusal(), webhookRefusal(), apierrors.NewNotFound(clusters.GroupResource(), "local-workload")}, wantCalls: 3, wantTold: true},
		{name: "refused until the wait runs out", answers: []error{webhookRefusal()}, wantCalls: 2, atLeast: true, wantErr: "an admission webhook did not answer the API server for", wantTold: true},
		{name: "the API server itself timed out", answers: []error{apierrors.NewTimeoutError("request did not complete", 30)}, wantCalls: 1, wantErr: "request did not complete"},
		{name: "another internal error", answers: []error{apierrors.NewInternalError(errors.New("etcdserver: leader changed"))}, wantCalls: 1, wantErr: "leader changed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
			calls := 0
			dyn.PrependReactor("delete", "clusters", func(k8stesting.Action) (bool, runtime.Object, error) {
				err := c.answers[min(calls, len(c.answers)-1)]
				calls++
				return true, nil, err
			})
			var out bytes.Buffer
			r := &run{o: Options{Progress: ui.New(ui.Options{Out: &out}), QueryTimeout: time.Second, AdmissionWait: 300 * time.Millisecond, AdmissionRetry: 10 * time.Millisecond}, dyn: dyn, sum: &Summary{}}
			found, err := r.del(context.Background(), clusters, "default", "local-workload")
			if c.wantErr == "" && err != nil {
				t.Fatalf("del: %v", err)
			}
			if c.wantErr != "" {
				if !errors.Is(err, ErrUnknownState) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("del: %v, want unknown state naming %q", err, c.wantErr)
				}
				if !strings.Contains(err.Error(), "deleting clusters default/local-workload") {
					t.Fatalf("del: %v does not name the object", err)
				}
			}
			if found != c.wantFound {
				t.Errorf("found = %v, want %v", found, c.wantFound)
			}
			if calls != c.wantCalls && !(c.atLeast && calls >= c.wantCalls) {
				t.Errorf("%d deletion calls, want %d", calls, c.wantCalls)
			}
			told := strings.Count(out.String(), "cannot reach an admission webhook")
			if c.wantTold && told != 1 || !c.wantTold && told != 0 {
				t.Errorf("the retry was told %d times, want it told once when it retries and never otherwise:\n%s", told, out.String())
			}
		})
	}
}
