package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/examples/jsoncloud"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
)

// The baseline of every benchmark here is the same provider code called in
// process (jsoncloud.New), measured in the same run; the plugin figures are
// reported beside it as ratios.

func benchState(b *testing.B, n int) sdk.Config {
	b.Helper()
	type res struct {
		Kind string            `json:"kind"`
		ID   string            `json:"id"`
		Tags map[string]string `json:"tags"`
	}
	var st struct {
		Resources []res `json:"resources"`
	}
	for i := range n {
		st.Resources = append(st.Resources, res{Kind: "vpc", ID: fmt.Sprintf("vpc-%d", i), Tags: map[string]string{"krops.io/cluster": "m"}})
	}
	raw, _ := json.Marshal(st)
	path := filepath.Join(b.TempDir(), "state.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	return sdk.Config{Environment: "bench", Raw: []byte(`{"environment": {"mgmt-cluster": "m"}}`), Env: map[string]string{"JSONCLOUD_STATE": path}}
}

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*p)]
}

// BenchmarkPluginColdStart: process start, handshake and first Describe.
func BenchmarkPluginColdStart(b *testing.B) {
	bin := sdktestBuild(b)
	var plugin, inproc []time.Duration
	for b.Loop() {
		start := time.Now()
		c, err := sdk.Load(context.Background(), "jsoncloud", sdk.LoadOptions{Path: bin, Stderr: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		plugin = append(plugin, time.Since(start))
		c.Close()
		start = time.Now()
		if _, err := jsoncloud.New("bench").Describe(context.Background()); err != nil {
			b.Fatal(err)
		}
		inproc = append(inproc, time.Since(start))
	}
	med, p95 := percentile(plugin, 0.5), percentile(plugin, 0.95)
	b.ReportMetric(float64(med.Microseconds())/1000, "ms_median")
	b.ReportMetric(float64(p95.Microseconds())/1000, "ms_p95")
	b.ReportMetric(float64(med)/float64(max(percentile(inproc, 0.5), 1)), "x_of_baseline")
}

// BenchmarkPluginUnaryCall: one Preflight round trip against calling it in
// process.
func BenchmarkPluginUnaryCall(b *testing.B) {
	ctx := context.Background()
	c, direct := pluginAndBaseline(b, 1)
	var viaPlugin, inproc time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := c.Preflight(ctx); err != nil {
			b.Fatal(err)
		}
		viaPlugin += time.Since(start)
		start = time.Now()
		if _, err := direct.Preflight(ctx); err != nil {
			b.Fatal(err)
		}
		inproc += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(viaPlugin-inproc)/n/1e3, "us_overhead/call")
	b.ReportMetric(float64(viaPlugin)/float64(max(inproc, 1)), "x_of_baseline")
}

// BenchmarkPluginDiscoverStream: resources per second streamed by Discover.
func BenchmarkPluginDiscoverStream(b *testing.B) {
	const n = 5000
	ctx := context.Background()
	c, direct := pluginAndBaseline(b, n)
	var viaPlugin, inproc time.Duration
	for b.Loop() {
		count := 0
		start := time.Now()
		if err := c.Discover(ctx, func(e sdk.DiscoverEvent) error {
			if e.Resource != nil {
				count++
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		viaPlugin += time.Since(start)
		start = time.Now()
		if err := direct.Discover(ctx, func(e sdk.DiscoverEvent) error {
			if e.Resource != nil {
				count++
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		inproc += time.Since(start)
		if count != 2*n {
			b.Fatalf("streamed %d, want %d", count, 2*n)
		}
	}
	b.ReportMetric(float64(n*b.N)/viaPlugin.Seconds(), "resources/s")
	b.ReportMetric(float64(n*b.N)/inproc.Seconds(), "baseline_resources/s")
	b.ReportMetric(float64(viaPlugin)/float64(max(inproc, 1)), "x_of_baseline")
}

// pluginAndBaseline returns the jsoncloud plugin subprocess and the same
// provider in process, both configured with a fake cloud of n resources.
// The plugin is closed when the benchmark ends.
func pluginAndBaseline(b *testing.B, n int) (*sdk.Client, sdk.Provider) {
	b.Helper()
	cfg := benchState(b, n)
	ctx := context.Background()
	c, err := sdk.Load(ctx, "jsoncloud", sdk.LoadOptions{Path: sdktestBuild(b), Stderr: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	if err := c.Configure(ctx, cfg, func(k string) (string, bool) { v, ok := cfg.Env[k]; return v, ok }); err != nil {
		b.Fatal(err)
	}
	direct := jsoncloud.New("bench")
	if err := direct.Configure(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	return c, direct
}

func sdktestBuild(tb testing.TB) string {
	return sdktest.Build(tb, "./examples/krops-provider-jsoncloud", "jsoncloud")
}
