package validate

import (
	"fmt"
	"io"
)

// Print writes one line per check, its problems and notes, and returns how
// many checks failed.
func Print(w io.Writer, results []Result) int {
	failed := 0
	for _, r := range results {
		if r.OK() {
			fmt.Fprintf(w, "✔ %s\n", r.Check)
		} else {
			failed++
			fmt.Fprintf(w, "✗ %s: %d problems\n", r.Check, len(r.Problems))
			for _, p := range r.Problems {
				fmt.Fprintf(w, "    %s: %s\n", p.Where, p.Message)
			}
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  · %s\n", n)
		}
	}
	return failed
}
