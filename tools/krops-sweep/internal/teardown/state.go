package teardown

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/kropsdev/krops/tools/kit/budget"
	"github.com/kropsdev/krops/tools/kit/kubewait"
)

// DefaultQueryTimeout bounds every Kubernetes query of a teardown.
const DefaultQueryTimeout = budget.APIRequest

// ErrUnknownState means a query did not answer clearly: the destructive step
// that needed it did not run (exit 3).
var ErrUnknownState = errors.New("unknown state")

// UnknownError names the query that left the state unknown.
type UnknownError struct {
	What string
	Err  error
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("%s: the state is unknown (%v)", e.What, e.Err)
}
func (e *UnknownError) Unwrap() []error { return []error{ErrUnknownState, e.Err} }

// list lists a resource with the query timeout. A resource type the server
// does not serve lists as empty (it cannot hold anything); any other
// failure is an UnknownError. disc, when set, decides "not served": a
// server without the resource's API group at all answers a list with a
// plain-text 404 that looks like any other NotFound, so only discovery can
// tell the two apart.
func list(ctx context.Context, timeout time.Duration, dyn dynamic.Interface, disc discovery.DiscoveryInterface, gvr schema.GroupVersionResource, ns, what string) ([]unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var ri dynamic.ResourceInterface = dyn.Resource(gvr)
	if ns != "" {
		ri = dyn.Resource(gvr).Namespace(ns)
	}
	l, err := ri.List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		return l.Items, nil
	case meta.IsNoMatchError(err):
		return nil, nil
	case apierrors.IsNotFound(err) && disc != nil:
		served, derr := kubewait.Served(disc, gvr)
		if derr != nil {
			return nil, &UnknownError{What: "listing " + what + " (and asking the API server whether it serves " + gvr.GroupVersion().String() + ")", Err: derr}
		}
		if !served {
			return nil, nil
		}
	case notServed(err):
		return nil, nil
	}
	return nil, &UnknownError{What: "listing " + what, Err: err}
}

// notServed: the API server does not know the resource type at all, told
// by the error's shape where no discovery client is at hand.
func notServed(err error) bool {
	if meta.IsNoMatchError(err) {
		return true
	}
	// A list of an unknown resource answers 404 with no object details.
	var se *apierrors.StatusError
	return apierrors.IsNotFound(err) && errors.As(err, &se) && se.ErrStatus.Details == nil
}
