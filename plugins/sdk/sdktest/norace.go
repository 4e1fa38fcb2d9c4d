//go:build !race

package sdktest

const raceBuild = false
