// Package storage keeps one Kafka partition as a log of segment files.
//
// # Directory layout
//
//	00000000000000000000.log        segment: raw RecordBatch v2 bytes
//	00000000000000000000.index      sparse offset index of that segment
//	00000000000000000000.timeindex  sparse time index of that segment
//	00000000000000012345.log        next segment, named by its base offset
//	...
//	clean-shutdown                  checkpoint, valid only while closed cleanly (zeroed by Open, synced by SyncCheckpoints)
//	log-start-offset                start offset set by DeleteRecordsBefore (see startoffset.go)
//	00000000000000000000.log.broken copy of a segment found corrupt (kept for an operator)
//
// # Segment files
//
// A segment holds whole RecordBatches (magic 2) back to back, exactly as
// appended: the broker fills in the base offset (outside the CRC) and
// nothing else changes, so a fetch hands file regions to sendfile. Offsets
// are contiguous: each batch's base offset is the previous batch's last
// offset + 1, and the first batch's is the base offset in the file name,
// except in sealed segments that compaction rewrote (clean.go), where
// removed batches leave gaps: offsets only increase.
// Only the last segment (the active one) is written; it is rolled when an
// append would take it past Config.SegmentBytes or when its first batch
// is older than Config.SegmentAge. Rolling syncs the segment, writes its
// indexes, creates the next file and syncs the directory.
//
// The active segment's file may run past its data: Log.Preallocate writes
// zeros (as far ahead as the segment holds, 16 KiB to
// Config.Preallocate, synced once) and appends
// write over them, so their fsyncs flush data only. A roll and a clean
// Close cut the zeros off first, so sealed segments and the clean-shutdown
// checkpoint name exact sizes; after a crash, the scan ends at the last
// valid batch and what follows is cut (RecoveryReport.PreallocatedBytes
// when it is all zeros, TruncatedBytes when part of a batch was written
// over them).
//
//	+-----------------+-----------------+-----+-----------------+
//	| batch at base   | batch           | ... | batch           |
//	+-----------------+-----------------+-----+-----------------+
//	each batch: baseOffset(8) batchLength(4) ... crc32c(4) ... records
//	(see package batch for the 61-byte header)
//
// # Index files
//
// Both index files share one frame, big-endian, ending in a CRC32C of all
// the bytes before it:
//
//	off size field
//	  0    4 magic "SLXO" (.index) or "SLXT" (.timeindex)
//	  4    1 version (1), then 3 bytes of padding
//	  8    8 base offset of the segment
//	 16    8 covered: bytes of the segment the index describes
//	 24    8 next offset after the covered batches
//	 32    8 largest batch max timestamp (math.MinInt64 when none)
//	 40    4 base offset of the batch holding it, relative to the base
//	 44    4 entry count
//	 48    … entries
//	  …    4 crc32c
//
//	.index entry     (8 bytes): relative base offset u32, byte position u32
//	.timeindex entry (12 bytes): timestamp i64, byte position u32
//
// An offset entry is added for the first batch starting at least
// Config.IndexInterval bytes after the previous entry. A time entry (ts,
// pos) says every batch before pos has a max timestamp of at most ts; one
// is added at the same spacing whenever the segment's max timestamp has
// grown. Lookups binary-search the entries, then read batch headers
// forward from the position found. Positions are 32-bit, so a segment
// holds at most 4 GiB.
//
// An index is written (synced) only after the bytes it covers have been
// synced: at roll for the old segment, and at Close for the active one.
// It is written over the existing file in place (its inode reused): a
// torn rewrite fails the checksum, and the segment is scanned instead.
// Readers use in-memory copies that the writer extends on every append.
//
// # Recovery
//
// Open lists the directory, removes leftover *.tmp files and indexes
// without a segment, and opens the segments in order:
//
//   - A sealed segment whose index files are intact (checksums, headers
//     agreeing, covered <= file size) is trusted up to covered; anything
//     past covered, or the whole segment when an index is missing or
//     corrupt, is scanned and the index rewritten.
//   - The active segment is trusted only if the clean-shutdown checkpoint
//     is intact and names it with its exact size and end offset, and its
//     index covers it. Otherwise (a crash) it is scanned whole.
//
// Scanning validates each batch: header length, magic 2, CRC32C, and that
// its base offset continues the log. At the first invalid batch:
//
//   - if this is the last segment and no valid batch (with a later base
//     offset) starts anywhere after the invalid bytes, it is a torn tail:
//     the end of a write that was never synced. The file is truncated
//     there and synced. A valid batch with the wrong offset is never
//     taken for a torn tail.
//   - otherwise valid data follows invalid data: Open copies the segment
//     to <name>.broken and returns a *CorruptionError naming the segment
//     file, the byte position and the expected offset. Nothing is
//     dropped; the original file is left untouched.
//
// Open then zeroes a valid checkpoint in place (and syncs it) before the
// log accepts writes, so a crash after Open forces the next Open to scan.
// Close cuts the zeros written ahead off the active segment, writes its
// indexes in place and syncs both (and the directory if a file was
// created), then writes the checkpoint in place and syncs it: a torn
// checkpoint fails its checksum, and it is written only once what it
// describes is durable. CloseAll does the same for many logs with two
// filesystem syncs in all (vfs.SyncSet: one syncfs on Linux).
// Log.Recovery reports what Open scanned, rebuilt and truncated.
//
// # Retention
//
// ApplyRetention removes whole segments from the oldest, never the
// active one: while a segment's newest batch is older than
// Config.RetentionAge, or the log without it still holds at least
// Config.RetentionBytes, or it lies wholly below the log start offset.
// Each removal is followed by a directory sync.
//
// The log start offset is the first remaining segment's base offset, or
// the offset DeleteRecordsBefore set if that is higher: it writes the new
// start to log-start-offset (synced, renamed, directory synced) before it
// takes effect, and Open reads it back (clamped to the log). SetConfig
// changes the segment and retention limits of an open log; the writer
// adopts them at its next Append or ApplyRetention.
//
// # Concurrency
//
// One writer goroutine calls Append, Roll, ApplyRetention and Close;
// readers call everything else concurrently. Sync may also run on one
// other goroutine, concurrently with the writer: it fsyncs the segment
// active when it starts, holding a reference to it, and a roll syncs the
// segment it seals, so bytes appended before Sync was called are durable
// when it returns. Log.failMu guards the failure that stops writes. Log.mu
// guards the segment list and each segment's size, end offset, max
// timestamp and in-memory indexes; no file I/O happens under it. Each
// segment's file is reference counted: the log holds one reference while
// the segment is listed and every read holds one while it runs, so
// retention and Close never close a file under a reader.
//
// # Write-behind tail
//
// With Config.WriteBehind set, the active segment's file is a tailFile:
// Append copies its bytes into an in-memory tail that is written to the
// file when it fills, and before every other operation on the file (Sync,
// Truncate, writes of zeros, Size); reads see the file and the tail
// together, and Slice.WriteTo sends with sendfile only what the file
// holds. tailFile.mu guards the tail and every write to the file (held
// across the write that flushes the tail); it is never held with Log.mu
// or Log.failMu (it may be with startMu or cleanMu, which are held
// across file I/O), and nothing is taken under it.
package storage
