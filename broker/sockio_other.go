//go:build !linux

package broker

import (
	"io"
	"net"
)

// newSockIO returns nc: raw socket calls (sockio_linux.go) are made on
// Linux only.
func newSockIO(nc net.Conn) io.ReadWriter { return nc }
