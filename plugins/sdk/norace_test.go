//go:build !race

package sdk_test

const raceFlag = ""
