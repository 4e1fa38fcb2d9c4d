//go:build !krops_testhooks

package main

import "github.com/kropsdev/krops/tools/krops-pivot/internal/pivot"

// testHooks does nothing in a release build: see testhooks.go.
func testHooks(*pivot.Options) {}
