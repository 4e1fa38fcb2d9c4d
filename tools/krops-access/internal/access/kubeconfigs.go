package access

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/ui"
)

// KubeconfigsOptions say where to write.
type KubeconfigsOptions struct {
	Inventory *Inventory
	// Dir receives <cluster>.kubeconfig per Cluster (made 0700).
	Dir      string
	Endpoint Endpoint
	Progress *ui.Progress
}

// Written is one kubeconfig written, and whether its cluster answered
// through it.
type Written struct {
	Cluster, Path, From string
	Answers             bool
}

// Kubeconfigs writes the kubeconfig of every Cluster of the inventory that
// has one (Clusters not provisioned yet are reported and skipped), each
// 0600, and checks each answers.
func Kubeconfigs(ctx context.Context, o KubeconfigsOptions) ([]Written, error) {
	names, err := o.Inventory.Clusters(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("kubeconfig directory %s: %w", o.Dir, err)
	}
	var out []Written
	for _, name := range names {
		raw, from, err := o.Inventory.Kubeconfig(ctx, name, o.Endpoint, func(w string) { o.Progress.Warnf("%s", w) })
		if err != nil {
			o.Progress.Infof("%s: no kubeconfig yet (%v)", name, err)
			continue
		}
		w := Written{Cluster: name, Path: filepath.Join(o.Dir, name+".kubeconfig"), From: from}
		if err := writePrivate(w.Path, raw); err != nil {
			return out, err
		}
		if cfg, err := clientcmd.RESTConfigFromKubeConfig(raw); err == nil {
			w.Answers = kubecfg.Answers(cfg) == nil
		}
		out = append(out, w)
	}
	return out, nil
}

// writePrivate writes data to path, 0600, replacing it whole.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
