// Package cleaner runs log compaction in the background: one Cleaner per
// data directory picks the dirtiest compacted partition and runs a
// storage.Log.Clean pass on it, rate-limited, one pass at a time.
//
// Choosing: every partition the Source lists is asked for its
// storage.CleanStats. A partition qualifies when its dirty ratio is at
// least its min.cleanable.dirty.ratio, when its oldest dirty records are
// older than max.compaction.lag.ms, or when a tombstone has outlived
// delete.retention.ms; among those the overdue ones come first, then the
// highest ratio. After a pass the Cleaner looks again at once; when
// nothing qualifies it waits Config.Interval (or a Wake).
package cleaner

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
)

// Target is one compacted partition and its settings.
type Target struct {
	Name string // for logs: "topic/partition"
	Log  *storage.Log
	// The topic configs of the same names.
	MinCleanableRatio float64
	MinCompactionLag  time.Duration
	MaxCompactionLag  time.Duration // <= 0: none
	DeleteRetention   time.Duration
	SegmentBytes      int64
	// StableOffset, when set, returns the partition's last stable offset
	// (first offset of its oldest open transaction, or the high
	// watermark): only segments below it are compacted.
	StableOffset func() int64
	// Aborted, when set, reports a transactional batch of an aborted
	// transaction (see storage.CleanOptions.Aborted).
	Aborted func(h *batch.Header) bool
}

// maxOffset is t's bound for a pass (0: none).
func (t *Target) maxOffset() int64 {
	if t.StableOffset == nil {
		return 0
	}
	return max(t.StableOffset(), 1) // 0 would mean "no bound"; offset 0 holds nothing cleanable
}

// Config sets up a Cleaner. Source is required.
type Config struct {
	// Source lists the compacted partitions; it is called once per round.
	Source func() []Target
	// Interval is how long the Cleaner sleeps when nothing qualifies.
	// Default 15s (log.cleaner.backoff.ms).
	Interval time.Duration
	// Rate returns the byte rate limit in effect, read and write bytes
	// together (log.cleaner.io.max.bytes.per.second); +Inf or <= 0: none.
	Rate   func() float64
	Logger *slog.Logger
	// Now is the clock passes use for lags and tombstones. Default
	// time.Now.
	Now func() time.Time
}

// DefaultInterval is the default Config.Interval.
const DefaultInterval = 15 * time.Second

// Stats counts the Cleaner's work since it started.
type Stats struct {
	Passes, Failures        int64
	BytesRead, BytesWritten int64 // of finished passes
	BytesProcessed          int64 // read and written, counted as passes go (a pass in progress included)
	RecordsRemoved          int64
	SegmentsReplaced        int64
	LastError               string
	LastTarget              string
	LastPassDuration        time.Duration
	ThrottledFor            time.Duration
	CurrentlyCleaning       bool
}

// Cleaner is the background compaction goroutine of one data directory.
//
// Goroutine ownership: Start starts the run goroutine; it is owned by the
// Cleaner and stops when Close is called (a pass in progress is cancelled
// and leaves its log as it was). Close waits for it and is idempotent.
type Cleaner struct {
	cfg    Config
	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu    sync.Mutex // guards stats
	stats Stats

	processed atomic.Int64 // bytes read and written by passes, counted as they go
}

// Start starts a Cleaner.
func Start(cfg Config) *Cleaner {
	c := newCleaner(cfg)
	go c.run()
	return c
}

// newCleaner builds a Cleaner without starting its goroutine.
func newCleaner(cfg Config) *Cleaner {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rate == nil {
		cfg.Rate = func() float64 { return math.Inf(1) }
	}
	c := &Cleaner{cfg: cfg, wake: make(chan struct{}, 1), done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// Wake makes the Cleaner look for work now instead of at its next
// interval.
func (c *Cleaner) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Stats returns a copy of the Cleaner's counters.
func (c *Cleaner) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.BytesProcessed = c.processed.Load()
	return st
}

// Close stops the Cleaner, cancelling a pass in progress, and waits for
// its goroutine. It is idempotent.
func (c *Cleaner) Close() error {
	c.once.Do(c.cancel)
	<-c.done
	return nil
}

func (c *Cleaner) run() {
	defer close(c.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-timer.C:
		case <-c.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		cleaned := c.RunOnce(c.ctx)
		wait := c.cfg.Interval
		if cleaned {
			wait = 0 // more may qualify
		}
		timer.Reset(wait)
	}
}

// RunOnce picks the partition most in need of compaction, if any
// qualifies, and runs one pass on it. It reports whether it ran a pass.
// The run goroutine calls it; a program without the goroutine may too.
func (c *Cleaner) RunOnce(ctx context.Context) bool {
	t, ok := c.pick()
	if !ok {
		return false
	}
	c.setCleaning(true)
	start := time.Now()
	lim := newLimiter(c.cfg.Rate())
	lim.count = &c.processed
	res, err := t.Log.Clean(ctx, storage.CleanOptions{
		Now:                c.cfg.Now(),
		MinCompactionLag:   t.MinCompactionLag,
		DeleteRetention:    t.DeleteRetention,
		TargetSegmentBytes: t.SegmentBytes,
		Throttle:           lim.wait,
		Aborted:            t.Aborted,
		MaxOffset:          t.maxOffset(),
	})
	c.mu.Lock()
	c.stats.CurrentlyCleaning = false
	c.stats.Passes++
	c.stats.BytesRead += res.BytesRead
	c.stats.BytesWritten += res.BytesWritten
	c.stats.RecordsRemoved += res.RecordsRemoved
	c.stats.SegmentsReplaced += int64(res.SegmentsReplaced)
	c.stats.LastTarget = t.Name
	c.stats.LastPassDuration = time.Since(start)
	c.stats.ThrottledFor += lim.slept
	if err != nil && !errors.Is(err, storage.ErrClosed) && ctx.Err() == nil {
		c.stats.Failures++
		c.stats.LastError = err.Error()
	}
	c.mu.Unlock()
	switch {
	case err != nil && (errors.Is(err, storage.ErrClosed) || ctx.Err() != nil):
		return false
	case err != nil:
		c.cfg.Logger.Warn("compaction pass failed", "partition", t.Name, "err", err)
		return false
	}
	c.cfg.Logger.Debug("compaction pass", "partition", t.Name, "read", res.BytesRead, "written", res.BytesWritten,
		"removed", res.RecordsRemoved, "segments_replaced", res.SegmentsReplaced, "cleaned_to", res.CleanedTo)
	return res.SegmentsWritten > 0 || res.RecordsRemoved > 0
}

func (c *Cleaner) setCleaning(on bool) {
	c.mu.Lock()
	c.stats.CurrentlyCleaning = on
	c.mu.Unlock()
}

// pick returns the partition to clean next.
func (c *Cleaner) pick() (Target, bool) {
	now := c.cfg.Now()
	var best Target
	bestScore, found := -1.0, false
	for _, t := range c.cfg.Source() {
		st, err := t.Log.CleanStats(now, t.MinCompactionLag, t.maxOffset())
		if err != nil {
			continue // closed meanwhile
		}
		ratio := st.DirtyRatio()
		overdue := st.DirtyBytes > 0 && t.MaxCompactionLag > 0 && st.OldestDirty >= 0 &&
			now.UnixMilli()-st.OldestDirty >= t.MaxCompactionLag.Milliseconds()
		score := -1.0
		switch {
		case overdue || st.TombstonesDue:
			score = 2 + ratio // before any merely dirty partition
		case st.DirtyBytes > 0 && ratio >= t.MinCleanableRatio:
			score = ratio
		}
		if score > bestScore {
			best, bestScore, found = t, score, score >= 0
		}
	}
	return best, found
}

// limiter spaces a pass's I/O to a byte rate.
type limiter struct {
	rate  float64 // bytes per second; +Inf: none
	start time.Time
	bytes float64
	slept time.Duration
	count *atomic.Int64 // when set, every byte is also counted here
}

func newLimiter(rate float64) *limiter {
	if rate <= 0 || math.IsNaN(rate) {
		rate = math.Inf(1)
	}
	return &limiter{rate: rate, start: time.Now()}
}

// wait blocks until n more bytes fit the rate since the pass started.
func (l *limiter) wait(ctx context.Context, n int) error {
	if l.count != nil {
		l.count.Add(int64(n))
	}
	if math.IsInf(l.rate, 1) {
		return nil
	}
	l.bytes += float64(n)
	due := l.start.Add(time.Duration(l.bytes / l.rate * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		l.slept += d
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
