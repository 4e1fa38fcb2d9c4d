package testenv

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// BenchmarkFaultProxyOverhead reports the proxy's cost per call as a ratio
// to calling the same upstream directly in the same run.
func BenchmarkFaultProxyOverhead(b *testing.B) {
	up := upstreamB(b)
	p := NewFaultProxy(b, up)
	call := func(url string) {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	const n = 300
	measure := func(url string) time.Duration {
		start := time.Now()
		for range n {
			call(url)
		}
		return time.Since(start)
	}
	var direct, proxied time.Duration
	for b.Loop() {
		direct += measure(up + "/x")
		proxied += measure(p.URL + "/x")
	}
	b.ReportMetric(float64(proxied)/float64(direct), "x_of_baseline")
	b.ReportMetric(float64(proxied-direct)/float64(b.N*n)/1e3, "us_overhead/call")
}

func upstreamB(b *testing.B) string {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}
