// Package wal is a write-ahead log shared by many partition logs: it makes
// small appends to many partitions durable with one fdatasync per group
// commit instead of one per partition.
//
// A partition's acceptor writes its batches to its own segment file (page
// cache; readers read them there) and hands the same bytes to the WAL.
// Sync(pos) returns once one fdatasync of the WAL covers pos: one caller
// at a time leads a round that writes everything appended so far, by
// every partition, and syncs it; everyone waiting on that round is
// released together. A small round's fdatasync keeps its goroutine's
// processor (a raw system call) instead of letting the runtime hand the
// processor to another thread while it blocks, which costs context
// switches per round; after an fdatasync slower than 100 ms rounds use
// the blocking call for 10 s, since a stop-the-world pause must wait for
// a held one (see WAL.syncRound). The partition's own segment is fsynced
// later, in the background, and the partition then checkpoints: WAL
// entries it has below the checkpoint are no longer needed, and a WAL
// segment whose every partition checkpointed past its entries is
// deleted.
//
// # Files
//
// The WAL is a directory of segment files named by a sequence number,
// "%020d.wal". Each is created full length and filled with zeros (and
// synced, with its directory) by a preparer goroutine ahead of need, so
// that an fdatasync after writing into it flushes data only: no file size
// or extent change to journal. Such a full-length segment is written with
// O_DIRECT where the filesystem allows it (WAL.write): the round's bytes,
// already in the partitions' segments in the page cache, are not copied
// there a second time, and the round's fdatasync has only the device's
// cache to flush; each write starts at the block the previous one ended
// in. Entries are written one after another from the start; the first entry that does not decode (zeros, a torn write)
// ends the segment's data. A failed write or fsync abandons the segment:
// the next round writes to a fresh one, so inside a segment nothing
// follows a bad entry that was ever acknowledged.
//
// # Entry
//
//	0   uint32  body length (bytes from offset 8)
//	4   uint32  CRC32C (Castagnoli) of the segment sequence number (8 bytes) and the body
//	            (kind 3: of the sequence number, the body's first 29 bytes and the
//	            first 21 bytes of each batch)
//	8   uint8   kind: 1 data, 2 truncate, 3 batches
//	9   [16]byte topic ID
//	25  int32   partition
//	29  int64   offset: the first offset of the data; the new log end of a truncate
//	37  ...     data: whole RecordBatches with their offsets (kinds 1 and 3); empty (kind 2)
//
// A batches entry (kind 3) is how data is written: a v2 RecordBatch's
// own CRC32C covers all of it but its first 21 bytes (base offset,
// length, leader epoch, magic, the CRC itself), so the entry's CRC covers
// those and decoding checks each batch's CRC, and the round's bytes are
// not checksummed a second time on the write path. It decodes only when
// the batches tile the data exactly and every CRC matches. Kind 1, whose
// CRC covers every byte, is what earlier versions wrote (still read) and
// what data that is not whole v2 batches is written as. A WAL that holds
// kind 3 entries is not read by versions before it; after a clean
// shutdown the WAL holds nothing to replay.
//
// All integers are big-endian. A truncate entry is written when a
// partition healed (its log cut back and refilled): entries of that
// partition before it are stale past its offset.
//
// # Recovery
//
// Open reads every segment in order. Replay.Apply then brings one
// partition log up to date after its own recovery scan: in WAL order,
// batches the log already holds are skipped, batches at its end are
// appended, and batches past its end (a hole: nothing from there on was
// ever acknowledged, since a partition acknowledges an offset only once
// every offset below it is durable) are ignored, as is everything of that
// partition after them until its next truncate entry. Once every
// partition was replayed and synced, Replay.Done deletes the old segments.
package wal
