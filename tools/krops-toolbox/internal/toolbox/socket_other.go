//go:build !unix

package toolbox

// socketGroup: engines outside unix (Docker Desktop on Windows) map the
// socket for the caller.
func socketGroup(string) (int, bool) { return 0, false }
