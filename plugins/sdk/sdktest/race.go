//go:build race

package sdktest

// raceBuild is true in test binaries built with -race.
const raceBuild = true
