package testenv

import (
	"io"
	"log"
	"net"
)

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }

func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
