//go:build !linux

package storage

import (
	"net"
	"os"
	"sync/atomic"
)

var sendfileBytes atomic.Int64

// sendfile is not used off Linux: WriteTo falls back to a positional copy.
func sendfile(dst *net.TCPConn, src *os.File, pos, n int64) (int64, bool, error) {
	return 0, false, nil
}
