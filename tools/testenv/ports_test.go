package testenv

import (
	"net"
	"strconv"
	"testing"
)

// A harness that starts a dozen controllers asks for two dozen ports in a
// row; each must be distinct, bindable, and outside both the range the
// kernel gives to outgoing connections and CAPD's in-memory ports.
func TestFreePortsAreDistinctBindableAndBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 300 {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if p < lowestPort || p > highestPort {
			t.Fatalf("port %d is outside [%d, %d]", p, lowestPort, highestPort)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d was handed out but cannot be bound: %v", p, err)
		}
		l.Close()
	}
}
