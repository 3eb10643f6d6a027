// Package groups is Sluice's consumer-group coordinator for Kafka's
// classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) and
// the consumer group protocol of KIP-848 (ConsumerGroupHeartbeat,
// ConsumerGroupDescribe; consumer.go draws its state and how it is
// changed; migrate.go moves groups between the two protocols), with committed offsets and group state persisted in an
// internal log.
//
// The broker holds one Coordinator and calls one handler method per Kafka
// API; each takes the kmsg request and returns the kmsg response.
// JoinGroup and SyncGroup block until the rebalance completes, so they
// take a context. The state machine of each group is described on type
// state (group.go); every file opens with the versions it serves and its
// behaviour notes.
//
// # Persistence
//
// Offsets and group metadata are records in the format of Kafka's
// __consumer_offsets topic (see records.go; consumer groups' records,
// under key versions of Sluice's own, in crecords.go), appended as RecordBatches to
// an internal partition log (package kvlog, over storage and an
// acceptor), and fsynced before the OffsetCommit or SyncGroup reply. Open
// replays the log; when it holds more than Config.CompactMinRecords
// records and more than twice its live ones, it is rewritten to the live
// records in a fresh directory and switched to atomically (kvlog). The state
// machine reaches the log only through the small store interface, so its
// tests run over an in-memory store.
//
// # Locks
//
// The lock order is in docs/lockorder.md ("groups"). No store call is made holding Coordinator.mu or a group.mu: a write's
// effect on memory is applied by the apply callback the store runs after
// the write is durable. Waiters' reply callbacks run under group.mu and
// never block. Config.PartitionExists runs under group.mu, after it in
// the order (the broker's topic lock), and so does
// Config.PendingTxnOffset (the transaction coordinator's lock).
//
// A consumer group's state is changed only with persistMu held
// exclusively (heartbeats, leaves, its timers, and the JoinGroup and
// LeaveGroup of classic members in it, mixed.go), and written through the
// store with group.mu released, as above; the describable callback a
// ConsumerGroupHeartbeat carries (the broker's authorizer) runs under
// group.mu, after it in the order. Config.Topics is called with no
// coordinator lock held.
package groups
