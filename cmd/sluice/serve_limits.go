package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicedb/sluice/broker"
)

// serveLimits are serve's flags for client quotas and for the bounds on
// what clients may hold: queued request bytes, idle and slow connections.
type serveLimits struct {
	quotaWindowNum     int
	quotaWindowSize    int
	queuedMaxBytes     int64
	idle               time.Duration
	requestReadTimeout time.Duration
}

func limitFlags(fs *pflag.FlagSet) *serveLimits {
	l := &serveLimits{}
	fs.IntVar(&l.quotaWindowNum, "quota-window-num", 11, "client quotas: samples in the rate window; a fresh client may burst the window's worth (quota.window.num)")
	fs.IntVar(&l.quotaWindowSize, "quota-window-size-seconds", 1, "client quotas: seconds of one sample of the rate window (quota.window.size.seconds)")
	fs.Int64Var(&l.queuedMaxBytes, "queued-max-request-bytes", 0, "bytes of requests read and not yet done with, over every connection; at the bound the broker stops reading from sockets (queued.max.request.bytes); 0: an eighth of the machine's memory, at most 1 GiB")
	fs.DurationVar(&l.idle, "connections-max-idle", broker.DefaultIdleTimeout, "close connections idle this long, or whose responses go unread this long (connections.max.idle.ms)")
	fs.DurationVar(&l.requestReadTimeout, "request-read-timeout", broker.DefaultRequestReadTimeout, "close connections that take longer to send one request")
	return l
}

func (l *serveLimits) opts() ([]broker.Opt, error) {
	if l.quotaWindowNum < 2 {
		return nil, usagef("serve: --quota-window-num %d: want at least 2", l.quotaWindowNum)
	}
	if l.quotaWindowSize < 1 {
		return nil, usagef("serve: --quota-window-size-seconds %d: want at least 1", l.quotaWindowSize)
	}
	if l.queuedMaxBytes < 0 {
		return nil, usagef("serve: --queued-max-request-bytes %d: want 0 (sized from the machine) or a byte count", l.queuedMaxBytes)
	}
	if l.idle <= 0 || l.requestReadTimeout <= 0 {
		return nil, usagef("serve: --connections-max-idle %v and --request-read-timeout %v: want positive durations", l.idle, l.requestReadTimeout)
	}
	return []broker.Opt{
		broker.QuotaWindow(l.quotaWindowNum, time.Duration(l.quotaWindowSize)*time.Second),
		broker.QueuedMaxRequestBytes(l.queuedMaxBytes),
		broker.IdleTimeout(l.idle),
		broker.RequestReadTimeout(l.requestReadTimeout),
	}, nil
}
