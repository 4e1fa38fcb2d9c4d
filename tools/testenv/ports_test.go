package testenv

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A harness that starts a dozen controllers asks for two dozen ports in a
// row; each must be distinct, bindable, and outside both the range the
// kernel gives to outgoing connections and CAPD's in-memory ports.
func TestFreePortsAreDistinctBindableAndBelowTheEphemeralRange(t *testing.T) {
	// The range is below this machine's ephemeral range, read from the
	// kernel rather than assumed (Linux's default starts at 32768, but a
	// host may lower it).
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatalf("reading the kernel's ephemeral port range: %v", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Fatalf("ip_local_port_range %q: want two numbers", b)
	}
	ephemeralLow, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatalf("ip_local_port_range %q: %v", b, err)
	}
	if highestPort >= ephemeralLow {
		t.Fatalf("the harness's ports reach %d, inside the kernel's ephemeral range (from %d): outgoing connections may take them", highestPort, ephemeralLow)
	}
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
