package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// The controllers the harness starts are told their ports on the command
// line, so a port has to be chosen before the process that binds it exists.
// Asking the kernel for port 0 and closing the listener is not enough: the
// kernel hands the same just-closed port out again (a manager was once given
// one port for both its health probe and its webhook server and exited), and
// outgoing connections take their source ports from that same ephemeral
// range, so one of them may take the port before the controller binds it.
//
// So ports come from 10000-18999: below the ephemeral range (32768 up by
// Linux's default), where the kernel never assigns one on its own, and
// below CAPD's in-memory backend, which takes 19000 and then 20000, 20001,
// ... for the fake API servers of its machines. Each is checked bindable,
// and none is handed out twice by this process.

var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

const (
	// lowestPort keeps clear of registered service ports.
	lowestPort = 10000
	// highestPort is below CAPD's in-memory debug port (19000).
	highestPort = 18999
)

func freePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 200 {
		p := lowestPort + rand.IntN(highestPort-lowestPort+1)
		if handedOut.ports[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		handedOut.ports[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free loopback port between %d and %d after 200 tries", lowestPort, highestPort)
}
