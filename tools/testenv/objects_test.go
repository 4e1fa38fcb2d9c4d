package testenv

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestConditionReadsStatusReasonAndGeneration(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Other", "status": "True"},
		// JSON decoding gives float64; typed conversions give int64.
		map[string]any{"type": "Ready", "status": "False", "reason": "DependencyNotReady", "message": "waiting", "observedGeneration": float64(3)},
		map[string]any{"type": "Stalled", "status": "True", "observedGeneration": int64(2)},
	}}}}
	if s, m, g := Condition(u, "Ready"); s != "False" || m != "DependencyNotReady: waiting" || g != 3 {
		t.Fatalf("Ready: %q %q %d", s, m, g)
	}
	if _, _, g := Condition(u, "Stalled"); g != 2 {
		t.Fatalf("Stalled generation %d", g)
	}
	if s, m, _ := Condition(u, "Absent"); s != "" || m != "no Absent condition yet" {
		t.Fatalf("absent: %q %q", s, m)
	}
}
