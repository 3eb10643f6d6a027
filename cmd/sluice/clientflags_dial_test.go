package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestWrapDialFailureNamesAddress checks the message of a dial that
// failed on a name lookup (an OpError without an Addr) to an address the
// broker advertised: the name, the reason and the --advertise hint, and
// no format verbs.
func TestWrapDialFailureNamesAddress(t *testing.T) {
	c := &conn{seeds: []string{"127.0.0.1:9092"}, timeout: time.Second}
	err := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "broker.example.com", IsNotFound: true}}
	got := c.wrap("topic create", err).Error()
	for _, want := range []string{"topic create: cannot reach broker.example.com: lookup broker.example.com: no such host", "--advertise"} {
		if !strings.Contains(got, want) {
			t.Errorf("message %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "%!") {
		t.Errorf("message %q has a formatting error", got)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092}, Err: errRefusedForTest{}}
	if got := c.wrap("topic list", refused).Error(); strings.Contains(got, "--advertise") || !strings.Contains(got, "cannot reach 127.0.0.1:9092") {
		t.Errorf("a seed's failure: %q", got)
	}
}

type errRefusedForTest struct{}

func (errRefusedForTest) Error() string { return "connection refused" }
