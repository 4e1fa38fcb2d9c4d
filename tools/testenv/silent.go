package testenv

import (
	"net"
	"testing"
)

// SilentEndpoint is a loopback TCP address that accepts connections and
// never answers: the listener never calls Accept, so the kernel completes
// each handshake and the request sits unread, as behind a proxy whose
// upstream is gone or a half-open VPN. It is closed when the test ends.
func SilentEndpoint(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for a silent endpoint: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}
