package main

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, addr string, cidrs ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Spec.PodCIDRs = cidrs
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: name},
		{Type: corev1.NodeInternalIP, Address: addr},
	}
	return n
}

func TestThePlanConfiguresOwnRangeAndRoutesPeers(t *testing.T) {
	nodes := []corev1.Node{
		node("worker-b", "172.18.0.5", "10.244.2.0/24"),
		node("cp", "172.18.0.3", "fd00:10:244::/64", "10.244.0.0/24"),
		node("worker-a", "172.18.0.4", "10.244.1.0/24"),
		node("joining", "172.18.0.6"), // no range yet: no route to it
	}
	p, err := planFor("172.18.0.3", nodes)
	if err != nil {
		t.Fatal(err)
	}
	if !p.ready || p.self != "cp" {
		t.Fatalf("plan for cp: ready=%v self=%q", p.ready, p.self)
	}
	var conf struct {
		Plugins []struct {
			Type string `json:"type"`
			IPAM struct {
				Ranges [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(p.config, &conf); err != nil {
		t.Fatalf("configuration is not JSON: %v\n%s", err, p.config)
	}
	if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "ptp" || conf.Plugins[0].IPAM.Ranges[0][0]["subnet"] != "10.244.0.0/24" {
		t.Errorf("configuration does not hand out cp's IPv4 range 10.244.0.0/24:\n%s", p.config)
	}
	var got []string
	for _, r := range p.routes {
		got = append(got, r.String())
	}
	if want := "10.244.1.0/24 via 172.18.0.4, 10.244.2.0/24 via 172.18.0.5"; strings.Join(got, ", ") != want {
		t.Errorf("routes = %q, want %q", strings.Join(got, ", "), want)
	}
}

func TestANodeWithoutARangeWritesNothing(t *testing.T) {
	p, err := planFor("172.18.0.6", []corev1.Node{node("cp", "172.18.0.3", "10.244.0.0/24"), node("joining", "172.18.0.6")})
	if err != nil {
		t.Fatal(err)
	}
	if p.ready || p.config != nil || p.self != "joining" {
		t.Errorf("a node without a pod range must wait: ready=%v self=%q config=%s", p.ready, p.self, p.config)
	}
	if len(p.routes) != 1 {
		t.Errorf("routes to the peers that have ranges are still planned: %v", p.routes)
	}
}

func TestABrokenRangeNamesItsNode(t *testing.T) {
	_, err := planFor("172.18.0.3", []corev1.Node{node("cp", "172.18.0.3", "10.244.0.0/33")})
	if err == nil || !strings.Contains(err.Error(), "node cp") || !strings.Contains(err.Error(), "10.244.0.0/33") {
		t.Fatalf("error = %v, want one naming node cp and its range", err)
	}
}
