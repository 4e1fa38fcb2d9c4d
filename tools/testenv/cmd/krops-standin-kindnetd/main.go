// Command krops-standin-kindnetd is a STAND-IN for kindnetd, the CNI daemon
// kind preloads into its node image and the local-host tree's
// ClusterResourceSet installs into CAPD clusters: its module is not on the
// Go module proxy here. The real-engine lane ships it under kindnetd's
// image name (tools/realengine/nodeimage.sh preloads it into the lane's
// node image), and it runs from the same DaemonSet kindnetd runs from.
//
// Like kindnetd it finds its node by HOST_IP, writes a ptp CNI
// configuration for the pod range the controller manager gave the node,
// and routes every peer node's range to that node's address, so pods
// reach each other across nodes. It does no NetworkPolicy, no IPv6 and
// no masquerade of its own (the ptp plugin's ipMasq does that part).
//
// Environment: HOST_IP (required), CONTROL_PLANE_ENDPOINT (host:port of
// the API server; empty: the in-cluster Service), CNI_CONF_DIR (default
// /etc/cni/net.d).
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

const confName = "10-kindnet.conflist"

func main() {
	logger := log.New(os.Stderr, "", log.LstdFlags|log.LUTC)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, logger); err != nil {
		logger.Fatal(err)
	}
}

func run(ctx context.Context, logger *log.Logger) error {
	hostIP := os.Getenv("HOST_IP")
	if hostIP == "" {
		return errors.New("HOST_IP is empty: the DaemonSet must set it from status.hostIP")
	}
	confDir := os.Getenv("CNI_CONF_DIR")
	if confDir == "" {
		confDir = "/etc/cni/net.d"
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("in-cluster configuration: %w", err)
	}
	// Without a CNI the Service address works only once kube-proxy has
	// programmed it; the endpoint kind passes avoids that wait.
	if ep := os.Getenv("CONTROL_PLANE_ENDPOINT"); ep != "" {
		cfg.Host = "https://" + ep
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	logger.Printf("STAND-IN for kindnetd (krops real-engine lane) on %s", hostIP)

	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes()
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, n any) { poke(n) },
		DeleteFunc: poke,
	}); err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return fmt.Errorf("listing nodes: %w", ctx.Err())
	}

	s := &syncer{hostIP: hostIP, confPath: filepath.Join(confDir, confName), nodes: nodes.Lister(), logger: logger, routes: map[string]route{}}
	// A resync puts back a route someone removed by hand.
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		if err := s.sync(); err != nil {
			logger.Print(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-tick.C:
		}
	}
}

type syncer struct {
	hostIP   string
	confPath string
	nodes    corelisters.NodeLister
	logger   *log.Logger
	// routes are the ones this process installed, by destination.
	routes map[string]route
	waited bool
}

func (s *syncer) sync() error {
	list, err := s.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var items []corev1.Node
	for _, n := range list {
		items = append(items, *n)
	}
	p, err := planFor(s.hostIP, items)
	if err != nil {
		return err
	}
	if !p.ready {
		if !s.waited {
			s.logger.Printf("node %q (HOST_IP %s) has no IPv4 pod range yet; waiting", p.self, s.hostIP)
			s.waited = true
		}
		return nil
	}
	if err := s.writeConfig(p.config); err != nil {
		return err
	}
	want := map[string]route{}
	for _, r := range p.routes {
		want[r.Dst.String()] = r
		if err := netlink.RouteReplace(&netlink.Route{Dst: r.Dst, Gw: r.Via}); err != nil {
			return fmt.Errorf("route %s: %w", r, err)
		}
		if old, ok := s.routes[r.Dst.String()]; !ok || !old.Via.Equal(r.Via) {
			s.logger.Printf("route %s", r)
		}
		s.routes[r.Dst.String()] = r
	}
	for dst, r := range s.routes {
		if _, ok := want[dst]; ok {
			continue
		}
		if err := netlink.RouteDel(&netlink.Route{Dst: r.Dst, Gw: r.Via}); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("removing route %s: %w", r, err)
		}
		s.logger.Printf("removed route %s (its node is gone or has no range)", r)
		delete(s.routes, dst)
	}
	return nil
}

// writeConfig replaces the configuration only when it changed, by rename,
// so the container runtime never reads half a file.
func (s *syncer) writeConfig(b []byte) error {
	if old, err := os.ReadFile(s.confPath); err == nil && bytes.Equal(old, b) {
		return nil
	}
	tmp := s.confPath + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, s.confPath); err != nil {
		return fmt.Errorf("writing %s: %w", s.confPath, err)
	}
	s.logger.Printf("wrote %s:\n%s", s.confPath, b)
	return nil
}
