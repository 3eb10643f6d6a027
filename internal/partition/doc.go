// Package partition owns one Kafka partition: its log, the acceptor that
// writes it, and everything derived from the log.
//
// # What a partition holds
//
//	Partition
//	├─ storage.Log         segment files, indexes, retention (package storage)
//	├─ acceptor.Acceptor   the one goroutine that appends to the log: queue,
//	│                      coalescing, group fsync, high watermark
//	├─ producerTable       idempotent producers: epoch and the last five
//	│                      batches' sequence ranges per producer id (producers.go)
//	├─ txnIndex            open transactions (first offset) and aborted ones
//	│                      (first offset, ABORT marker offset): the last
//	│                      stable offset and read_committed fetches (txnindex.go)
//	├─ snapState           producer-state snapshot bookkeeping (snapshot.go)
//	├─ watchers            long-polling fetches waiting for the high watermark
//	└─ Traffic             records and bytes in and out
//
// # Life
//
// Open recovers the log (a torn tail is cut), replays what the shared
// write-ahead log holds for it, loads the newest usable producer-state
// snapshot, rebuilds the producer table and transaction index from the
// batch headers after it, and starts the acceptor. Close stops the
// acceptor and closes the log; CloseClean first writes a snapshot at the
// log end, so that the next Open scans nothing. A partition whose write
// or fsync fails heals itself when the disk works again: the acceptor
// recovers the log and the state is rebuilt on its goroutine.
//
// # The append check
//
// Enqueue hands validated batches (package batch parsed them once) to the
// acceptor with a check that runs on the acceptor goroutine, serialized
// with offset assignment, so that no two appends race on producer state:
//
//  1. the snapshot point: a capture whose log prefix became durable goes
//     to the snapshot writer (Snapshots), and after every interval of
//     accepted bytes the state is captured at the offset the append gets;
//  2. transactional batches: the transaction coordinator's check
//     (TxnCoordinator, KIP-98; with Implicit, KIP-890's implicit add),
//     then the idempotence check, then the transaction is opened at its
//     first offset;
//  3. idempotent batches: the idempotence check (producers.go): a retry
//     is answered with its original offset and not written, a gap is
//     OUT_OF_ORDER_SEQUENCE_NUMBER, a stale epoch INVALID_PRODUCER_EPOCH.
//
// EnqueueMarker writes a transaction's COMMIT or ABORT marker the same
// way. The Append state a caller passes is embeddable by value, so that a
// produce request over thousands of partitions allocates nothing per
// partition. Errors carry Kafka codes (Error).
//
// # Reads
//
// Read stops at the high watermark (what is durable) or, for
// read_committed, at the last stable offset; AbortedIn lists the aborted
// transactions a read_committed response carries. A long-polling fetch
// registers a Waiter on each partition it reads; the acceptor signals it
// when the high watermark advances.
//
// # Snapshots
//
// The snapshot file format, when snapshots are taken and how recovery
// chooses one are described at the top of snapshot.go.
//
// Locks: docs/lockorder.md ("partition").
package partition
