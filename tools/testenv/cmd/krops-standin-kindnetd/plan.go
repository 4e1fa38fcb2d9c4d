package main

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// route sends a peer node's pod range to that node's address on the
// network the nodes share (the engine's bridge).
type route struct {
	Dst *net.IPNet
	Via net.IP
}

func (r route) String() string { return r.Dst.String() + " via " + r.Via.String() }

// plan is what this node needs: the CNI configuration for its own pod
// range and a route to every peer's. ready is false while the controller
// manager has not given this node a range yet (nothing may be written
// then: a configuration without a range would hand out addresses that
// collide with a peer's).
type plan struct {
	self   string
	ready  bool
	config []byte
	routes []route
}

// planFor finds this node among nodes by the address the kubelet reports
// (HOST_IP, what kindnetd matches too) and plans from the IPv4 ranges.
func planFor(hostIP string, nodes []corev1.Node) (plan, error) {
	var p plan
	for _, n := range nodes {
		addr := internalIPv4(n)
		cidr, err := podCIDRv4(n)
		if err != nil {
			return plan{}, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if addr == nil || cidr == nil {
			continue
		}
		if addr.String() == hostIP {
			p.self, p.ready = n.Name, true
			if p.config, err = conflist(cidr); err != nil {
				return plan{}, err
			}
			continue
		}
		p.routes = append(p.routes, route{Dst: cidr, Via: addr})
	}
	if p.self == "" {
		for _, n := range nodes {
			if a := internalIPv4(n); a != nil && a.String() == hostIP {
				p.self = n.Name // known, but no range yet
			}
		}
	}
	slices.SortFunc(p.routes, func(a, b route) int { return strings.Compare(a.Dst.String(), b.Dst.String()) })
	return p, nil
}

func internalIPv4(n corev1.Node) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip := net.ParseIP(a.Address).To4(); ip != nil {
			return ip
		}
	}
	return nil
}

func podCIDRv4(n corev1.Node) (*net.IPNet, error) {
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		_, ipn, err := net.ParseCIDR(c)
		if err != nil {
			return nil, fmt.Errorf("pod CIDR %q: %w", c, err)
		}
		if ipn.IP.To4() != nil {
			return ipn, nil
		}
	}
	return nil, nil
}

// conflist is a point-to-point interface per pod with addresses from the
// node's range, as kindnetd configures; ipMasq hides pod addresses from
// destinations outside the range (kindnetd masquerades only traffic that
// leaves the cluster's pod network: a difference the lane does not see,
// since nothing there checks a peer pod's source address).
func conflist(cidr *net.IPNet) ([]byte, error) {
	type ipam struct {
		Type   string                `json:"type"`
		Ranges [][]map[string]string `json:"ranges"`
		Routes []map[string]string   `json:"routes"`
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "kindnet",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": true,
				"mtu":    1500,
				"ipam": ipam{
					Type:   "host-local",
					Ranges: [][]map[string]string{{{"subnet": cidr.String()}}},
					Routes: []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("CNI configuration for %s: %w", cidr, err)
	}
	return append(b, '\n'), nil
}
