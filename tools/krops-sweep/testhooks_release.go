//go:build !krops_testhooks

package main

// stopAfter has no stop point in a release build: see testhooks.go.
func stopAfter() string { return "" }
