package kubewait

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Gone watches each target until the API server confirms it absent (a
// list without it, or its Deleted event), passing a one-line summary to
// o.Report whenever it changes: how many are gone and, for the
// first still there, its status.phase ("Deleting") when it has one. A
// target's Client says which cluster it is on (nil: o.Client).
//
// left is what was still there when the wait ended early: with an error
// wrapping ErrTimeout (a *TimeoutError), ErrInterrupted, or the cluster's
// *NoAnswerError.
func Gone(ctx context.Context, o Options, targets ...Target) (left []State, err error) {
	if len(targets) == 0 {
		return nil, nil
	}
	sets := make([]Set, len(targets))
	for i, t := range targets {
		sets[i] = Set{Resource: t.Resource, Namespace: t.Namespace, FieldSelector: "metadata.name=" + t.Name, Client: t.Client}
	}
	for _, t := range targets {
		left = append(left, State{Target: t, Found: true, Message: "not confirmed gone"})
	}
	line := Changes(func(l string) {
		if o.Report != nil {
			o.Report(l)
		}
	})
	err = Until(ctx, o, sets, func(snap Snapshot) (bool, error) {
		left = left[:0]
		for i, objs := range snap {
			if len(objs) > 0 {
				left = append(left, State{Target: targets[i], Found: true, Message: stillThere(objs[0])})
			}
		}
		if len(left) > 0 {
			line(fmt.Sprintf("%d of %d gone; waiting for %s", len(targets)-len(left), len(targets), left[0]))
		}
		return len(left) == 0, nil
	})
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, ErrTimeout):
		return left, &TimeoutError{Timeout: o.Timeout, Blocking: left, Not: "gone"}
	case errors.Is(err, ErrInterrupted):
		return left, fmt.Errorf("%w: %s still there", ErrInterrupted, names(left))
	}
	return left, err
}

func stillThere(u *unstructured.Unstructured) string {
	if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != "" {
		return phase
	}
	if u.GetDeletionTimestamp() != nil {
		return "deleting"
	}
	return "still there"
}

func names(states []State) string {
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = s.Target.String()
	}
	return strings.Join(parts, ", ")
}
