package e2e_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/testenv"
)

func itoa(n int) string { return strconv.Itoa(n) }

// The local-host lifecycle end to end: `task bootstrap`'s chain creates
// "kind", seeds the real Flux Operator and Flux onto it, which reconcile
// the e2e tree; the real Cluster API controllers provision local-management
// and local-workload; krops-pivot moves them to the management cluster and
// deletes kind; the Cluster API controllers there take the clusters over;
// `task teardown` deletes the workload cluster through the real cascade.
func TestLocalHostLifecycle(t *testing.T) {
	l := newLifecycle(t)
	for i, argv := range l.bootstrap() {
		if i == 4 && os.Getenv("DEBUG_PAUSE") != "" {
			time.Sleep(8 * time.Minute)
		}
		l.mustRun(t, nil, argv...)
	}
	if got := strings.Join(l.kind.created, ","); got != "mgmt" {
		t.Errorf("kind clusters created: %q, want mgmt", got)
	}
	if got := strings.Join(l.kind.deleted, ","); got != "mgmt" {
		t.Errorf("kind clusters deleted by the pivot: %q, want mgmt", got)
	}
	if _, err := os.Stat(filepath.Join(l.home, ".kube", "krops-mgmt.yaml")); err != nil {
		t.Errorf("the management cluster's kubeconfig: %v", err)
	}

	// The management cluster's own Cluster API controllers (installed by
	// the pivot through the operator, which cannot run here) take over.
	testenv.RunClusterAPIStack(t, l.target)
	for _, name := range []string{"local-management", "local-workload"} {
		d := testenv.WaitCluster(t, l.target, "default", name, testenv.ClusterAvailable, 4*time.Minute)
		t.Logf("%s Available on the management cluster %s after its controllers started", name, d.Round(time.Second))
	}

	task := testenv.Program(t, "KROPS_TASK_BIN", "task", "run tests through `tools/task.sh test`, which installs the pinned task")
	r := l.mustRun(t, nil, task, "--taskfile", filepath.Join(absRepo(t), "Taskfile.yml"), "teardown", "ENV=local-host", "BIN="+l.bin)
	t.Logf("teardown:\n%s", r.Stderr)
	if l.exists(t, "local-workload") {
		t.Error("the workload Cluster is still there after the teardown")
	}
}

func absRepo(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (l *lifecycle) exists(t *testing.T, name string) bool {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(testenv.ClusterGVK)
	err := l.target.Client.Get(l.ctx, client.ObjectKey{Namespace: "default", Name: name}, u)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}
