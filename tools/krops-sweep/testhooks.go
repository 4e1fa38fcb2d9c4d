//go:build krops_testhooks

package main

import "os"

// stopAfter is the test-only stop point: the rerun tests end the teardown
// at a step boundary, as a crash would. Only binaries built with the
// krops_testhooks tag (the test harness's builds) read it; a release build
// has not even the variable's name (TestReleaseBuildsCarryNoTestHooks).
func stopAfter() string { return os.Getenv("KROPS_TEST_TEARDOWN_STOP_AFTER") }
