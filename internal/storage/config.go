package storage

import (
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Config sets a partition log's layout and retention. Zero values take
// the defaults noted on each field.
type Config struct {
	SegmentBytes   int64         // roll when the active segment reaches this size; default 1 GiB (segment.bytes); at most 4 GiB-1
	SegmentAge     time.Duration // roll when the active segment's first batch is older; default 7 days (segment.ms); <0 = never
	RetentionBytes int64         // keep at most this many bytes; <0 or 0 = unlimited (retention.bytes, default -1)
	RetentionAge   time.Duration // delete segments whose newest batch is older; <0 = unlimited; 0 = default 7 days (retention.ms)
	IndexInterval  int           // bytes between sparse offset-index entries; default 4096 (index.interval.bytes)
	// Preallocate is the most bytes of zeros Log.Preallocate keeps
	// written and synced ahead of the active segment's data (as many as
	// the segment holds, at least 16 KiB), so that an fsync after an
	// append covers data only; default 256 KiB; <0 off.
	Preallocate int64
	// WriteBehind, when positive, keeps up to this many of the active
	// segment's newest bytes in memory instead of writing each Append to
	// the file: they are written in one write once that many are
	// buffered, and always before the segment is synced (Sync, Roll,
	// Close) or otherwise touched; readers see them either way. A Sync
	// still makes every appended byte durable, but a process that dies
	// loses the buffered bytes, which a plain write would have left in
	// the page cache: set it only when every append is made durable
	// elsewhere before it is acknowledged (the broker's shared
	// write-ahead log, which replays them). 0 (the default): off.
	WriteBehind int
	// OnPending, for a log made by Create with WriteBehind on, is called
	// once, when the bytes its first segment keeps in memory because the
	// segment's file is not made yet reach 256 KiB, or when the logs
	// sharing Pending keep more than its budget: the caller should call
	// Log.Prepare soon, on a goroutine of its own (it is called on the
	// appending one, with no lock of the log held). Until then, and for a
	// log written less, the file is made by the first Sync (the
	// write-ahead log's checkpoint) or truncation; Close drops the bytes
	// kept (the write-ahead log replays them).
	OnPending func()
	// Pending, if set, is the memory budget shared by the logs kept in
	// memory before their files are made (PendingBudget).
	Pending *PendingBudget
	// DirSyncs, if set, batches the directory syncs of the first Sync of
	// logs made by Create with those of other logs sharing it.
	DirSyncs *DirSyncs
	Now      func() time.Time
	// RetainFrom, if set, returns an offset retention must keep: a
	// segment is removed only when every offset in it is below
	// RetainFrom() (the partition's last stable offset, so that an open
	// transaction's records and its place in the aborted-transaction
	// index survive until the transaction ends).
	RetainFrom func() int64
	// Logger receives the log's warnings (a torn tail cut at Open, a
	// failed log recovered); default: discard. Callers attach the topic
	// and partition with Logger.With.
	Logger *slog.Logger

	// verify makes Open scan and check every batch of every segment,
	// trusting no index or checkpoint (Repair uses it).
	verify bool
	// noCopy keeps Open from copying a corrupt segment aside (Repair's
	// report-only mode changes nothing on disk).
	noCopy bool
}

// Defaults applied to zero Config fields.
const (
	DefaultSegmentBytes  = 1 << 30
	DefaultSegmentAge    = 7 * 24 * time.Hour
	DefaultRetentionAge  = 7 * 24 * time.Hour
	DefaultIndexInterval = 4096
	DefaultPreallocate   = 256 << 10

	// maxSegmentBytes bounds a segment so that index positions fit in 32 bits.
	maxSegmentBytes = math.MaxUint32
)

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentBytes < 0 || c.SegmentBytes > maxSegmentBytes {
		return c, fmt.Errorf("storage: SegmentBytes %d out of range (1..%d)", c.SegmentBytes, int64(maxSegmentBytes))
	}
	if c.SegmentAge == 0 {
		c.SegmentAge = DefaultSegmentAge
	}
	if c.RetentionAge == 0 {
		c.RetentionAge = DefaultRetentionAge
	}
	if c.IndexInterval == 0 {
		c.IndexInterval = DefaultIndexInterval
	}
	if c.IndexInterval < 0 {
		return c, fmt.Errorf("storage: IndexInterval %d is negative", c.IndexInterval)
	}
	if c.WriteBehind < 0 {
		return c, fmt.Errorf("storage: WriteBehind %d is negative", c.WriteBehind)
	}
	if c.Preallocate == 0 {
		c.Preallocate = DefaultPreallocate
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
