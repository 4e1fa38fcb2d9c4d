// Package inputs reads what the aws provider plugin supplies for the
// controllers (the Secrets CAPA and ACK read and the cluster-vars
// ConfigMap) back into the values krops-aws needs: the account, the region
// and CAPA's encoded credentials. The plugin is the one place that builds
// them, so the file krops-aws writes and the Secret krops applies cannot
// differ.
package inputs

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kropsdev/krops/tools/kit/kubeapply"
)

// Controllers are the values, never printed whole: Encoded is a secret.
type Controllers struct {
	Account, Region string
	// Encoded is AWS_B64ENCODED_CREDENTIALS's value.
	Encoded string
}

// The objects and keys the aws plugin supplies (its controllers.go).
const (
	capaNamespace, credentialsName = "capa-system", "aws-credentials"
	encodedKey                     = "AWS_B64ENCODED_CREDENTIALS"
	fluxNamespace, clusterVars     = "flux-system", "cluster-vars"
)

// Parse finds the values in the plugin's manifests. Errors name the object
// that is missing, never a value.
func Parse(manifests [][]byte) (Controllers, error) {
	var c Controllers
	for i, m := range manifests {
		objs, err := kubeapply.Decode(m, "")
		if err != nil {
			return Controllers{}, fmt.Errorf("the aws plugin's manifest #%d is not valid YAML for Kubernetes objects (content not shown)", i+1)
		}
		for _, o := range objs {
			switch {
			case o.GetKind() == "Secret" && o.GetNamespace() == capaNamespace && o.GetName() == credentialsName:
				c.Encoded = value(o, encodedKey)
			case o.GetKind() == "ConfigMap" && o.GetNamespace() == fluxNamespace && o.GetName() == clusterVars:
				c.Account, _, _ = unstructured.NestedString(o.Object, "data", "AWS_ACCOUNT_ID")
				c.Region, _, _ = unstructured.NestedString(o.Object, "data", "AWS_REGION")
			}
		}
	}
	switch {
	case c.Encoded == "":
		return Controllers{}, fmt.Errorf("the aws plugin supplied no Secret %s/%s with %s: is it a krops aws plugin of this version?", capaNamespace, credentialsName, encodedKey)
	case c.Account == "" || c.Region == "":
		return Controllers{}, fmt.Errorf("the aws plugin supplied no ConfigMap %s/%s with AWS_ACCOUNT_ID and AWS_REGION: is it a krops aws plugin of this version?", fluxNamespace, clusterVars)
	}
	return c, nil
}

// value reads a Secret's key from stringData or, decoded, data.
func value(o *unstructured.Unstructured, key string) string {
	if v, ok, _ := unstructured.NestedString(o.Object, "stringData", key); ok {
		return v
	}
	if v, ok, _ := unstructured.NestedString(o.Object, "data", key); ok {
		if b, err := base64.StdEncoding.DecodeString(v); err == nil {
			return string(b)
		}
	}
	return ""
}

// WritePrivate writes data to path with mode 0600, replacing a file there
// whole: a new file in the same directory, renamed over the old one, so no
// reader ever sees a partial or wider-readable file.
func WritePrivate(path string, data []byte) error {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s, not a file: name a file to write the credentials to", path, fi.Mode().Type())
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing the credentials next to %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	// CreateTemp makes it 0600 already; said again, as it is the point.
	err = errors.Join(f.Chmod(0o600), write(f, data), f.Sync(), f.Close())
	if err != nil {
		return fmt.Errorf("writing the credentials to %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the credentials to %s: %w", path, err)
	}
	return nil
}

func write(f *os.File, data []byte) error {
	_, err := f.Write(data)
	return err
}
