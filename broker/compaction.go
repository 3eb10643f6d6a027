package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/cleaner"
)

// startCleaner starts the data directory's log cleaner (see package
// internal/cleaner). The Broker owns it and closes it in Close before the
// partitions.
func (b *Broker) startCleaner() {
	b.cleaner = cleaner.Start(cleaner.Config{
		Source:   b.cleanerTargets,
		Interval: b.cfg.cleanerInterval,
		Rate:     func() float64 { return b.dynamic().cleanerRate() },
		Logger:   b.cfg.logger.With("component", "cleaner"),
	})
}

// cleanerTargets lists every partition of every compacted topic with its
// compaction settings.
func (b *Broker) cleanerTargets() []cleaner.Target {
	var ts []cleaner.Target
	for _, t := range b.sortedTopics() {
		if !t.conf.compact {
			continue
		}
		for _, p := range t.parts {
			ts = append(ts, cleaner.Target{
				Name:              fmt.Sprintf("%s/%d", t.name, p.Index()),
				Log:               p.Log(),
				MinCleanableRatio: t.conf.minCleanableRatio,
				MinCompactionLag:  msDuration(t.conf.minCompactionLagMs),
				MaxCompactionLag:  msDuration(t.conf.maxCompactionLagMs),
				DeleteRetention:   msDuration(t.conf.deleteRetentionMs),
				SegmentBytes:      t.conf.segmentBytes,
				StableOffset:      p.LastStableOffset,
				Aborted:           p.AbortedBatch,
			})
		}
	}
	return ts
}

// requireKeys refuses records without a key on a compacted topic, as
// Kafka does (INVALID_RECORD): compaction keeps one record per key, and a
// record without one could never be kept.
func requireKeys(topic string, partition int32, records []byte) error {
	_, err := batch.Split(records, func(h batch.Header, raw []byte) error {
		if h.Control() {
			return nil
		}
		return batch.Records(&h, raw, func(r *batch.Record) error {
			if r.Key == nil {
				return errCode(kerr.InvalidRecord, "compacted topic %s cannot accept a record without a key (partition %d, offset delta %d); set a key or use cleanup.policy=delete", topic, partition, r.OffsetDelta)
			}
			return nil
		})
	})
	if err != nil {
		if _, ok := err.(*codeError); ok {
			return err
		}
		return errCode(kerr.CorruptMessage, "records of a compacted topic do not decode: %v", err)
	}
	return nil
}

// CleanerStats counts the log cleaner's work since the broker started.
type CleanerStats struct {
	Passes, Failures        int64
	BytesRead, BytesWritten int64 // by finished passes
	BytesProcessed          int64 // read and written, a pass in progress included
	RecordsRemoved          int64
	SegmentsReplaced        int64
	LastError               string // of the last failed pass
}

// CleanerStats reports the log cleaner's counters.
func (b *Broker) CleanerStats() CleanerStats {
	s := b.cleaner.Stats()
	return CleanerStats{
		Passes: s.Passes, Failures: s.Failures,
		BytesRead: s.BytesRead, BytesWritten: s.BytesWritten, BytesProcessed: s.BytesProcessed,
		RecordsRemoved: s.RecordsRemoved, SegmentsReplaced: s.SegmentsReplaced, LastError: s.LastError,
	}
}
