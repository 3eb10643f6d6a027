// Package acceptor is a partition's write path: one goroutine per
// partition owns every write to its storage.Log and turns many small
// appends into few large writes and fewer fsyncs (group commit).
//
// # Pipeline
//
//	Append ──> bounded queue (Config.QueueSize; full: the caller blocks until its ctx ends)
//	              │
//	              ▼ run goroutine, one request per turn:
//	           validate batches, Request.Check, assign offsets (rewrite base offsets in place)
//	              │
//	              ├─ more requests queued, or buffer not empty: copy into the coalescing
//	              │  buffer (Config.BufferSize, from a pool shared by all acceptors); a full
//	              │  buffer is written first and the append starts an emptied one
//	              ├─ at least the buffer's size, Config.NoCoalesce, or nothing else waiting:
//	              │  written as-is (after the buffer), never copied
//	              ▼
//	           queue empty ──> write the buffer (no fsync) ──> next turn, queue still
//	           empty ──> fsync (inline, or on the sync goroutine under load) ──> when it
//	           returns: the high watermark advances to what was written when it
//	           started, and the acks=all appends written before it started are
//	           released ──> next idle turn: storage.Log.Preallocate (zeros ahead)
//
// Writing without fsync when the queue first drains, and fsyncing only on
// a later turn that still finds it empty, gives producers a moment to
// refill the queue, so one fsync covers more appends. Under sustained load
// (the queue never empties) the flush ticker forces a write and fsync at
// least every Config.FlushInterval. A segment roll inside storage.Log.Append
// fsyncs the old segment.
//
// While appends come one at a time (a lone synchronous producer) the run
// goroutine fsyncs inline and releases the waiters itself: no goroutine
// is woken for the fsync and none wakes it back. Once appends arrive
// during an fsync, the next fsyncs run on a second goroutine (the sync
// goroutine, owned by the run goroutine, which starts it and stops it at
// Close): while the disk syncs, the run goroutine goes on taking,
// coalescing and writing appends, so disk time and CPU time overlap
// instead of adding up; an fsync during which nothing arrives switches
// back to inline. At most one fsync is in flight; appends written while
// it runs wait for the next one, which starts as soon as the queue drains
// again. Acceptors sharing Config.Syncs run at most cap(Syncs) fsyncs at
// once. A durable append whose caller asks for it (Request.SyncInline: it
// has nothing else to do meanwhile, such as a connection with no other
// request in flight) is written, fsynced and released on the caller's
// goroutine when the run goroutine is idle, in the same conditions as it
// would fsync inline and when the partition fsyncs its own segment (no
// WAL, or it writes alone): no goroutine is woken at all.
//
// Once everything written is durable and the queue is empty, after an
// fsync of at most 64 KiB (small, latency-bound appends), the run
// goroutine has the log write zeros ahead of its data
// (storage.Log.Preallocate), so that the next fsyncs flush data only; a
// partition that is not written never does.
//
// # Release rules
//
// An append with Durable false (acks=1) is released once written. One
// with Durable true (acks=all) is released under FsyncAlways only after
// the fsync that covers it, and the high watermark (what readers may see)
// advances only after fsync. FsyncInterval and FsyncNever release every
// append once written and advance the high watermark on write: they trade
// durability for latency (a machine crash can lose acknowledged appends).
//
// # Failure
//
// A failed write or fsync fails every append it covers, every append
// written but not yet durable, and every later append: the partition
// refuses appends (Err says why) until it heals: with backoff, its log
// cuts itself back to what a successful fsync covered and rescans its
// tail (storage.Log.Recover), Config.Recovered rebuilds the caller's
// state, and appends resume from the log's end. A failed fsync is never
// retried on the same bytes, since the kernel may already have dropped
// the dirty pages. No append is acknowledged as durable unless
// the fsync covering it succeeded.
//
// # Waiters
//
// Append is Enqueue followed by Pending.Wait. A caller that has several
// appends to make (a produce request for many partitions, or a pipelined
// connection) enqueues them all and then waits for each, so they share
// writes and fsyncs; appends enqueued one after another by one goroutine
// get offsets in that order.
//
// Each Append borrows a pooled waiter with a reusable channel, so the hot
// path allocates nothing per append beyond the caller's own Request. A
// caller whose ctx ends while its append is queued cancels it (it is
// never written); once the acceptor has taken it, the caller waits only
// until its bytes are copied or written, then returns ctx.Err().
package acceptor
