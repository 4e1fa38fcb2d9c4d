//go:build race

package sdk_test

// raceFlag makes the third-party module build as this test binary was
// built, so it reuses its packages from the build cache.
const raceFlag = " -race"
