package e2e_test

import (
	"testing"
	"time"
)

// BenchmarkLocalHostLifecycle runs the lifecycle without faults and
// reports each phase's wall time and how much of it krops spent on its own
// work against waiting on controllers (the Wait steps of its progress
// output), measured in the same run: own_share is own work over the
// phase's wall time, and own_x_of_waiting is all of krops's own work over
// all its waiting. The phase table is in the log (-v). It is a phase
// report with no baseline: nothing else here runs the same lifecycle to
// compare with.
func BenchmarkLocalHostLifecycle(b *testing.B) {
	for range b.N {
		l := newLifecycle(b)
		chain := l.bootstrap()
		var phases []phase
		add := func(name string, r result) { phases = append(phases, phase{name, r.wall, r.waiting}) }
		b.ResetTimer()
		pre := l.mustRun(b, runOptions{}, chain[0]...)
		pre2 := l.mustRun(b, runOptions{}, chain[1]...)
		phases = append(phases, phase{"preflight", pre.wall + pre2.wall, pre.waiting + pre2.waiting})
		add("kind", l.mustRun(b, runOptions{}, chain[2]...))
		add("seed", l.mustRun(b, runOptions{}, chain[3]...))
		add("pivot", l.mustRun(b, runOptions{}, chain[4]...))
		// All waiting: the management cluster's controllers take over.
		d := l.controllersTakeOver(b)
		phases = append(phases, phase{"controllers-take-over", d, d})
		add("teardown", l.mustRun(b, runOptions{}, l.teardown(b)...))
		b.StopTimer()

		var own, waiting time.Duration
		for _, p := range phases {
			b.ReportMetric(p.wall.Seconds(), p.name+"_s")
			if p.wall > 0 {
				b.ReportMetric(float64(p.wall-p.waiting)/float64(p.wall), p.name+"_own_share")
			}
			own += p.wall - p.waiting
			waiting += p.waiting
		}
		if waiting > 0 {
			b.ReportMetric(float64(own)/float64(waiting), "own_x_of_waiting")
		}
		b.Logf("phases:\n%s", report(b, phases))
	}
}
