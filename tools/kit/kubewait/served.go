package kubewait

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Served reports whether the API server serves gvr, by discovery: false
// only when discovery answers that the group/version is absent or lacks the
// resource. A list of a group the server lacks answers a plain-text 404
// that no error check recognises reliably; discovery does not guess.
func Served(disc discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (bool, error) {
	rl, err := disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	for _, r := range rl.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}
