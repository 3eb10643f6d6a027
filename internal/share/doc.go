// Package share is the share-group coordinator (KIP-932, queues for
// Kafka): share-group members and the simple assignor, share sessions,
// and each share partition's state, durable across a kill -9.
//
// # Share-partition state
//
// A share partition is one group's view of one topic partition: a start
// offset (SPSO) below which every record is acknowledged or archived,
// and the in-flight records from it up to the end offset (SPEO), the
// next offset never acquired. Each in-flight record is available,
// acquired (locked by one member until share.record.lock.duration.ms
// passes), acknowledged or archived, and carries its delivery count. A
// record released (or whose lock expires) at share.delivery.count.limit
// deliveries is archived; the window end-start never exceeds
// group.share.partition.max.record.locks. Control batches, and under
// read_committed aborted transactions' batches, are archived without
// being delivered; read_committed reads stop at the last stable offset.
//
// # Durable state
//
// The state lives in a kvlog.Log (fsync policy always) in Config.Dir.
// Records, keyed as records.go draws:
//
//	group    'g' group id                    → version, group epoch (nil: deleted)
//	partition 'p' len, group id, topic id, p → version, kind, start, runs (nil: deleted)
//
// A partition value is a full state (kind 1: the start offset and runs
// covering every in-flight offset) or a delta (kind 0: the new start
// offset and runs of the offsets that changed). A run is (offset gap
// from the previous run's end, length, state, delivery count); states
// are stored as available, acknowledged or archived: an acquired record
// is stored as available with the count it was delivered with, because
// its lock dies with the process. Every change (an acquisition, an
// acknowledgement, a release, an expired lock) appends one delta, queued
// in the order the changes were made (sharePartition.writeMu) and
// durable before the request that made it is answered. The log's
// compaction writes the snapshot: one full value per share partition.
//
// Recovery replays the log in order: a full value replaces the
// partition's state, a delta moves its start and overwrites the runs it
// holds. Every record then available at the delivery limit is archived
// (it was acquired for its last delivery and not acknowledged), so an
// acknowledged record is never delivered again and an acquired one is
// delivered again with its delivery count plus one.
package share
