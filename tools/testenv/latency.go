package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// Latencies are detection latencies.
type Latencies []time.Duration

// Percentile is the p-th percentile (0 < p <= 100), nearest rank.
func (l Latencies) Percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// DetectionSamples measures how long a wait takes to notice a change, n
// samples at once: every wait(ctx, i) starts together, and change(i) runs
// for each sample at a random moment between 200 ms and 200 ms + spread
// later, so a polling wait meets each change at a random phase of its
// interval. A sample's latency runs from just before change(i) writes to
// wait(ctx, i) returning. Running the samples side by side bounds a
// benchmark's wall time by one spread plus one detection, instead of n of
// each, which is what lets it take twenty samples of a 10 s poll. The
// latencies are in sample order.
func DetectionSamples(tb testing.TB, n int, spread time.Duration, change func(i int) error, wait func(ctx context.Context, i int) error) Latencies {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+2*spread)
	defer cancel()
	out := make(Latencies, n)
	errs := make(chan error, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		changed := make(chan time.Time, 1)
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := wait(ctx, i); err != nil {
				errs <- fmt.Errorf("sample %d: waiting: %w", i, err)
				return
			}
			select {
			case at := <-changed:
				out[i] = time.Since(at)
			case <-ctx.Done():
				errs <- fmt.Errorf("sample %d: the wait returned before the change was made", i)
			}
		}()
		go func() {
			defer wg.Done()
			time.Sleep(200*time.Millisecond + rand.N(spread))
			at := time.Now()
			if err := change(i); err != nil {
				errs <- fmt.Errorf("sample %d: changing: %w", i, err)
				cancel()
			}
			changed <- at
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return out
}

// ReportDetection reports detection samples for b, grouped by each sample's
// label (labels[i] for lat[i]): the baseline group's p50 and p95, every
// other group's p50, and each other group's p50 over the baseline's as
// x_vs_<label>. Names are <label>_p50_ms and <label>_p95_ms.
func ReportDetection(b *testing.B, labels []string, lat Latencies, baseline string) {
	groups := map[string]Latencies{}
	var order []string
	for i, d := range lat {
		if _, ok := groups[labels[i]]; !ok {
			order = append(order, labels[i])
		}
		groups[labels[i]] = append(groups[labels[i]], d)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	base := groups[baseline]
	b.ReportMetric(ms(base.Percentile(50)), baseline+"_p50_ms")
	b.ReportMetric(ms(base.Percentile(95)), baseline+"_p95_ms")
	for _, l := range order {
		if l == baseline {
			continue
		}
		b.ReportMetric(ms(groups[l].Percentile(50)), l+"_p50_ms")
		b.ReportMetric(float64(groups[l].Percentile(50))/float64(max(base.Percentile(50), time.Millisecond)), "x_vs_"+l)
	}
}
