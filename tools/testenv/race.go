//go:build race

package testenv

// raceBuild is true in test binaries built with -race.
const raceBuild = true
