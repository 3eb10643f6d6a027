package broker

import (
	"fmt"

	"github.com/sluicedb/sluice/internal/acceptor"
)

// FsyncPolicy says when the broker makes appended records durable (the
// Fsync option).
type FsyncPolicy int8

const (
	// FsyncAlways: an acks=all reply is sent only once the records are
	// fsynced (group commit: many appends share one fsync), and consumers
	// never read past what is fsynced. Kafka's
	// log.flush.interval.messages=1. The default.
	FsyncAlways FsyncPolicy = iota
	// FsyncInterval: records are acknowledged once written and fsynced
	// about once a second. A machine crash loses up to a second of
	// acknowledged records; a process crash loses nothing the OS holds.
	FsyncInterval
	// FsyncNever: nothing is fsynced while the broker runs (Close
	// syncs). For tests and benchmarks only: a machine crash loses
	// acknowledged records.
	FsyncNever
)

// String names the policy as `sluice serve --fsync` spells it.
func (p FsyncPolicy) String() string {
	switch p {
	case FsyncAlways:
		return "always"
	case FsyncInterval:
		return "interval"
	case FsyncNever:
		return "never"
	}
	return fmt.Sprintf("FsyncPolicy(%d)", int8(p))
}

// ParseFsyncPolicy parses "always", "interval" or "never".
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	for _, p := range []FsyncPolicy{FsyncAlways, FsyncInterval, FsyncNever} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("fsync policy %q: want always, interval or never", s)
}

// acceptorPolicy is p as the partitions' write goroutines take it; an
// unknown policy gets the safe one.
func (p FsyncPolicy) acceptorPolicy() acceptor.FsyncPolicy {
	switch p {
	case FsyncInterval:
		return acceptor.FsyncInterval
	case FsyncNever:
		return acceptor.FsyncNever
	}
	return acceptor.FsyncAlways
}
