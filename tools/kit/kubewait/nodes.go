package kubewait

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// NodeSummary says where a cluster's nodes stand.
type NodeSummary struct {
	Total, Ready int
	// NotReady names each node that is not Ready with its condition:
	// "mgmt-worker (False, KubeletNotReady: ...)".
	NotReady []string
}

// Done: at least one node, all Ready. Zero nodes is waiting (EKS starts
// without nodes, kind before its kubelet registers), never success.
func (s NodeSummary) Done() bool { return s.Total > 0 && s.Ready == s.Total }

func (s NodeSummary) String() string {
	if s.Total == 0 {
		return "no nodes yet"
	}
	out := fmt.Sprintf("%d of %d nodes Ready", s.Ready, s.Total)
	if len(s.NotReady) > 0 {
		out += "; not Ready: " + strings.Join(s.NotReady, ", ")
	}
	return out
}

// SummarizeNodes reads the Ready condition of each node (as listed, sorted
// by name).
func SummarizeNodes(nodes []*unstructured.Unstructured) NodeSummary {
	var s NodeSummary
	for _, n := range nodes {
		s.Total++
		status, why := nodeReadiness(n)
		if status == "True" {
			s.Ready++
			continue
		}
		s.NotReady = append(s.NotReady, fmt.Sprintf("%s (%s)", n.GetName(), why))
	}
	return s
}

func nodeReadiness(n *unstructured.Unstructured) (status, why string) {
	conds, _, _ := unstructured.NestedSlice(n.Object, "status", "conditions")
	for _, raw := range conds {
		c, ok := raw.(map[string]any)
		if !ok || c["type"] != "Ready" {
			continue
		}
		status, _ = c["status"].(string)
		why = status
		if r, _ := c["reason"].(string); r != "" {
			why += ", " + r
		}
		if m, _ := c["message"].(string); m != "" {
			why += ": " + m
		}
		return status, why
	}
	return "Unknown", "no Ready condition yet"
}

// NodesTimeoutError: the nodes were not all Ready in time.
type NodesTimeoutError struct {
	Last NodeSummary
	Err  error // wraps ErrTimeout or ErrInterrupted
}

func (e *NodesTimeoutError) Error() string { return fmt.Sprintf("%v (%s)", e.Err, e.Last) }
func (e *NodesTimeoutError) Unwrap() error { return e.Err }

// NodesReady watches a cluster's nodes until there is at least one and all
// are Ready, passing each summary that differs from the last to o.Report.
// When the time runs out it returns a *NodesTimeoutError with
// the last summary, or a *NoAnswerError when the cluster never answered.
func NodesReady(ctx context.Context, o Options) error {
	var last NodeSummary
	report := Changes(func(line string) {
		if o.Report != nil {
			o.Report(line)
		}
	})
	err := Until(ctx, o, []Set{{Resource: nodesGVR}}, func(snap Snapshot) (bool, error) {
		last = SummarizeNodes(snap[0])
		report(last.String())
		return last.Done(), nil
	})
	var na *NoAnswerError
	if err == nil || errors.As(err, &na) {
		return err
	}
	if errors.Is(err, ErrTimeout) || errors.Is(err, ErrInterrupted) {
		return &NodesTimeoutError{Last: last, Err: err}
	}
	return err
}
