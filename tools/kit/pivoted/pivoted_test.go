package pivoted_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/pivoted"
	"github.com/kropsdev/krops/tools/testenv"
)

// Each state is read from a real API server, and the refusal for it keeps
// the exit-code contract: 2 for a live earlier pivot, 3 for a management
// cluster that cannot be read, nothing for the rest.
func TestWhatTheManagementContextSaysAboutAnEarlierPivot(t *testing.T) {
	ctx := context.Background()
	mgmt := testenv.APIServer(t, testenv.ClusterOptions{Name: "krops-mgmt"})
	o := pivoted.Options{Cluster: kubecfg.Ref{Path: mgmt.Kubeconfig, Context: mgmt.Context}, FluxNamespace: "flux-system", Timeout: 5 * time.Second}

	look := func(o pivoted.Options) pivoted.Finding {
		t.Helper()
		f, err := pivoted.Look(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}

	none := o
	none.Cluster.Path = filepath.Join(t.TempDir(), "absent.yaml")
	if f := look(none); f.State != pivoted.None || f.CreateKindGuard("local-host", none) != nil {
		t.Fatalf("no kubeconfig: got %+v, want None and no refusal", f)
	}
	other := o
	other.Cluster.Context = "somebody-else"
	if f := look(other); f.State != pivoted.None {
		t.Fatalf("kubeconfig without the context: got %+v, want None", f)
	}

	if f := look(o); f.State != pivoted.NotYet || f.CreateKindGuard("local-host", o) != nil {
		t.Fatalf("answering, no run metadata: got %+v, want NotYet and no refusal", f)
	}

	mgmt.CreateRunMetadata(t, ctx, "local-host-20261201t191333z")
	f := look(o)
	if f.State != pivoted.Pivoted || f.RunID != "local-host-20261201t191333z" {
		t.Fatalf("run metadata on the management cluster: got %+v, want Pivoted by local-host-20261201t191333z", f)
	}
	err := f.CreateKindGuard("local-host", o)
	if cli.ExitCode(err) != 2 || !errors.Is(err, pivoted.ErrPivoted) {
		t.Fatalf("refusal for a pivoted cluster: exit %d, %v; want exit 2 wrapping ErrPivoted", cli.ExitCode(err), err)
	}
	for _, want := range []string{"local-host-20261201t191333z", o.Cluster.Context, o.Cluster.Path, "task teardown ENV=local-host"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %q: %v", want, err)
		}
	}

	if err := mgmt.Stop(); err != nil {
		t.Fatal(err)
	}
	f = look(o)
	if f.State != pivoted.Unknown || f.Err == nil {
		t.Fatalf("stopped management cluster: got %+v, want Unknown with its error", f)
	}
	err = f.CreateKindGuard("local-host", o)
	if cli.ExitCode(err) != 3 {
		t.Fatalf("refusal for an unreadable cluster: exit %d, %v; want 3", cli.ExitCode(err), err)
	}
	if !strings.Contains(err.Error(), "config delete-context "+o.Cluster.Context) {
		t.Errorf("the refusal does not say how to forget a cluster that is gone: %v", err)
	}
}

func TestAKubeconfigThatCannotBeReadIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mgmt.yaml")
	if err := os.WriteFile(path, []byte("clusters: [this is not a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := pivoted.Look(context.Background(), pivoted.Options{Cluster: kubecfg.Ref{Path: path, Context: "krops-mgmt"}, FluxNamespace: "flux-system"})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want an error naming %s", err, path)
	}
}
