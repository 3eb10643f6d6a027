package main

import (
	"fmt"
	"net"
	"os"
)

// sdNotify sends state (such as "READY=1") to the service manager on the
// unix datagram socket NOTIFY_SOCKET names, as systemd's sd_notify does
// for a Type=notify unit (packaging/systemd/sluice.service). It does
// nothing when NOTIFY_SOCKET is unset; a name beginning with '@' is an
// abstract socket.
func sdNotify(state string) error {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	if name[0] != '/' && name[0] != '@' {
		return fmt.Errorf("NOTIFY_SOCKET %q: want an absolute path or an abstract socket name (@...)", name)
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify the service manager: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify the service manager: %w", err)
	}
	return nil
}
