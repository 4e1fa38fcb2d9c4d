package validate

import (
	"github.com/kropsdev/krops/tools/kit/ui"
)

// Print reports one line per check, its problems and notes, and returns how
// many checks failed.
func Print(p *ui.Progress, results []Result) int {
	failed := 0
	for _, r := range results {
		if r.OK() {
			p.Successf("%s", r.Check)
		} else {
			failed++
			p.Failuref("%s: %d problems", r.Check, len(r.Problems))
			for _, pr := range r.Problems {
				p.Infof("  %s: %s", pr.Where, pr.Message)
			}
		}
		for _, n := range r.Notes {
			p.Infof("· %s", n)
		}
	}
	return failed
}
