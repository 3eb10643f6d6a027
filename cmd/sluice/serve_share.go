package main

import (
	"github.com/spf13/pflag"

	"github.com/sluicedb/sluice/broker"
)

// shareFlags adds serve's share-group flags, each named after Kafka's
// broker setting; the broker checks their values at start.
func shareFlags(fs *pflag.FlagSet) *broker.ShareGroupSettings {
	s := &broker.ShareGroupSettings{}
	fs.DurationVar(&s.RecordLockDuration, "share-lock-duration", 0, "how long a share consumer holds the records it acquired before they are delivered to another (group.share.record.lock.duration.ms; 0: 30s)")
	fs.IntVar(&s.DeliveryCountLimit, "share-delivery-count-limit", 0, "deliveries of a share-group record before it is archived (group.share.delivery.count.limit, 2-10; 0: 5)")
	fs.IntVar(&s.PartitionMaxRecordLocks, "share-max-record-locks", 0, "records in flight per share partition (group.share.partition.max.record.locks, 100-10000; 0: 2000)")
	fs.DurationVar(&s.HeartbeatInterval, "share-heartbeat", 0, "share-group member heartbeat interval (group.share.heartbeat.interval.ms; 0: 5s)")
	fs.DurationVar(&s.SessionTimeout, "share-session-timeout", 0, "share-group member session timeout (group.share.session.timeout.ms; 0: 45s)")
	fs.IntVar(&s.MaxSize, "share-max-size", 0, "members per share group (group.share.max.size; 0: 200)")
	fs.StringVar(&s.AutoOffsetReset, "share-auto-offset-reset", "latest", "where a share group starts reading a partition: latest, earliest, or by_duration:PnDTnHnMnS (share.auto.offset.reset, for every share group)")
	fs.StringVar(&s.IsolationLevel, "share-isolation-level", "read_uncommitted", "read_uncommitted, or read_committed to never deliver aborted or open transactions' records (share.isolation.level, for every share group)")
	return s
}
