package main

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/sluicedb/sluice/broker"
)

// portUse is an address serve will listen on and the flag that sets it.
type portUse struct {
	addr, flag, hint string
}

// ports lists every address serve listens on: the Kafka listeners, the
// HTTP server and the schema registry.
func (o serveOptions) ports() []portUse {
	kafka := "stop the other broker (a Kafka or a second sluice) or choose another address with --listen"
	var ps []portUse
	if o.sec.listeners != "" {
		ls, err := broker.ParseListeners(o.sec.listeners, o.sec.advertised)
		if err == nil { // a bad --listeners fails later with its own message
			for _, l := range ls {
				ps = append(ps, portUse{l.Addr, "--listeners " + l.Protocol, "stop the other broker (a Kafka or a second sluice) or choose another address in --listeners"})
			}
		}
	} else {
		ps = append(ps, portUse{o.listen, "--listen", kafka})
	}
	if o.http != nil && o.http.addr != "" {
		ps = append(ps, portUse{o.http.addr, "--http", "choose another with --http, or turn it off with --http ''"})
	}
	if o.schema != nil && o.schema.addr != "" {
		ps = append(ps, portUse{o.schema.addr, "--schema-registry", "choose another with --schema-registry, or turn it off with --schema-registry ''"})
	}
	return ps
}

// checkPorts binds each address that names a port, and closes it again,
// so that serve fails on a port another process holds before it creates
// the data directory or logs that it listens.
func checkPorts(ps []portUse) error {
	for _, p := range ps {
		if _, port, err := net.SplitHostPort(p.addr); err != nil || port == "0" {
			continue // port 0 always binds; a malformed address fails later with its own message
		}
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("serve: %s %s: the address is already in use: %s", p.flag, p.addr, p.hint)
			}
			return fmt.Errorf("serve: %s %s: %w", p.flag, p.addr, err)
		}
		ln.Close()
	}
	return nil
}
