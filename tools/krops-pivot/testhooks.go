//go:build krops_testhooks

package main

import (
	"fmt"
	"os"

	"github.com/kropsdev/krops/tools/krops-pivot/internal/pivot"
)

// testHooks reads the test-only stop points. They let the resumption tests
// end the process at a step boundary or in the middle of the move, the way
// a crash or a kill would. Only binaries built with the krops_testhooks tag
// (the test harness's builds) have them; a release build has not even the
// variables' names (TestReleaseBuildsCarryNoTestHooks).
func testHooks(o *pivot.Options) {
	o.StopAfter = os.Getenv("KROPS_TEST_PIVOT_STOP_AFTER")
	if n := os.Getenv("KROPS_TEST_PIVOT_KILL_AFTER_CREATES"); n != "" {
		var limit, seen int
		fmt.Sscan(n, &limit)
		o.MoveMutator = func(kind, namespace, name string) {
			seen++
			if seen > limit {
				fmt.Fprintf(os.Stderr, "KROPS_TEST_PIVOT_KILL_AFTER_CREATES=%d: exiting before creating %s %s/%s\n", limit, kind, namespace, name)
				os.Exit(137)
			}
		}
	}
}
