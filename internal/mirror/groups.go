package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// translation is the outcome of translate.
type translation int

const (
	translated translation = iota
	pending                // past what is committed on the target: not yet
	beforeMap              // before this run's offset map: look it up by content
)

// translate returns the target offset of the first record at or after
// source offset c, from this run's offset map.
func (ps *partState) translate(c int64) (int64, translation) {
	switch {
	case c > ps.committed:
		return 0, pending
	case c == ps.committed:
		return ps.tgtNext, translated
	}
	// The first run ending after c.
	i := sort.Search(len(ps.runs), func(i int) bool { return ps.runs[i].src+ps.runs[i].n > c })
	if i == len(ps.runs) {
		// Past every copied record: only control records (or nothing)
		// between c and the committed position.
		if c >= ps.startSrc || ps.fresh {
			return ps.tgtNext, translated
		}
		return 0, beforeMap
	}
	r := ps.runs[i]
	if c >= r.src {
		return r.tgt + (c - r.src), translated
	}
	// c is in a gap before run i: the first record at or after it is
	// the run's first, provided nothing before the run is unknown.
	if i > 0 || c >= ps.startSrc || ps.fresh {
		return r.tgt, translated
	}
	return 0, beforeMap
}

// translateByContent finds the target offset of the first record at or
// after source offset c when c precedes this run's offset map (an earlier
// run copied it): it reads that source record, asks the target for the
// first offset at or after its timestamp, and reads forward to the record
// with the same key, value, headers and timestamp. Results are cached.
func (m *mirror) translateByContent(ctx context.Context, ps *partState, c int64) (int64, error) {
	if off, ok := ps.byContent[c]; ok {
		return off, nil
	}
	var want *kgo.Record
	err := m.scan(ctx, m.cfg.From, m.cfg.SourceOpts, ps.topic, ps.part, c, ps.startSrc, func(r *kgo.Record) bool {
		want = r
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("reading source %s/%d from %d: %w", ps.topic, ps.part, c, err)
	}
	var off int64
	if want == nil {
		// No record between c and where this run started.
		off = ps.startTgt
	} else {
		los, err := m.tgtAdm.ListOffsetsAfterMilli(ctx, want.Timestamp.UnixMilli(), ps.topic)
		if err == nil {
			err = los.Error()
		}
		if err != nil {
			return 0, fmt.Errorf("listing target %s/%d offsets by time: %w", ps.topic, ps.part, err)
		}
		lo, _ := los.Lookup(ps.topic, ps.part)
		found := false
		err = m.scan(ctx, m.cfg.To, m.cfg.TargetOpts, ps.topic, ps.part, lo.Offset, ps.startTgt, func(r *kgo.Record) bool {
			if sameRecord(r, want) {
				off, found = r.Offset, true
			}
			return found
		})
		if err != nil {
			return 0, fmt.Errorf("reading target %s/%d from %d: %w", ps.topic, ps.part, lo.Offset, err)
		}
		if !found {
			return 0, fmt.Errorf("source %s/%d offset %d (timestamp %d) is not on the target before offset %d", ps.topic, ps.part, want.Offset, want.Timestamp.UnixMilli(), ps.startTgt)
		}
	}
	if ps.byContent == nil {
		ps.byContent = map[int64]int64{}
	}
	ps.byContent[c] = off
	return off, nil
}

func sameRecord(a, b *kgo.Record) bool {
	if !bytes.Equal(a.Key, b.Key) || (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Value, b.Value) ||
		!a.Timestamp.Equal(b.Timestamp) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// scan reads the committed data records of one partition in [from, to)
// and calls fn on each until it returns true.
func (m *mirror) scan(ctx context.Context, seeds []string, extra []kgo.Opt, topic string, part int32, from, to int64, fn func(*kgo.Record) bool) error {
	if from >= to {
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	}, extra...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, fe := range fs.Errors() {
			return fe.Err
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if done {
				return
			}
			if r.Offset >= to {
				done = true
				return
			}
			if !r.Attrs.IsControl() && fn(r) {
				done = true
			}
		})
		if done {
			return nil
		}
	}
}

// syncGroups translates the committed offsets of the selected source
// groups and writes them to the target, for groups without active members
// there.
func (m *mirror) syncGroups(ctx context.Context) error {
	listed, err := m.srcAdm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("mirror: listing source groups: %w", err)
	}
	var names []string
	for _, g := range listed.Sorted() {
		if g.Group == m.cfg.Name || m.cfg.Groups != nil && !m.cfg.Groups.MatchString(g.Group) {
			continue
		}
		names = append(names, g.Group)
	}
	if len(names) == 0 {
		return nil
	}
	tgtGroups, err := m.tgtAdm.DescribeGroups(ctx, names...)
	if err != nil {
		return fmt.Errorf("mirror: describing target groups: %w", err)
	}
	for _, g := range names {
		st := GroupStats{Offsets: map[string]map[int32]int64{}}
		if why, ok := m.ownedByTarget[g]; ok {
			st.Skipped = why
			m.groups[g] = st
			continue
		}
		if d, ok := tgtGroups[g]; ok && d.Err == nil && (len(d.Members) > 0 || d.ProtocolType != "") {
			// Sticky: once a group has run on the target, its offsets
			// there are its own, even after its members leave. A group
			// keeps its protocol type ("consumer") after its last member
			// left, so a later mirror run sees that it ran; offsets the
			// mirror commits from outside the group leave it empty.
			why := fmt.Sprintf("has run on the target (%d members seen); it owns its offsets there", len(d.Members))
			if len(d.Members) == 0 {
				why = fmt.Sprintf("has run on the target (protocol type %q, now empty); it owns its offsets there", d.ProtocolType)
			}
			m.ownedByTarget[g] = why
			st.Skipped = why
			m.groups[g] = st
			continue
		}
		if moved, err := m.committedElsewhere(ctx, g); err != nil {
			return err
		} else if moved {
			m.ownedByTarget[g] = "committed on the target by someone else since the mirror wrote it; it owns its offsets there"
			st.Skipped = m.ownedByTarget[g]
			m.groups[g] = st
			continue
		}
		committed, err := m.srcAdm.FetchOffsets(ctx, g)
		if err != nil {
			st.Skipped = fmt.Sprintf("fetching its source offsets: %v", err)
			m.groups[g] = st
			continue
		}
		out := kadm.Offsets{}
		var waiting, failed []string
		committed.Each(func(o kadm.OffsetResponse) {
			ps := m.partState(o.Topic, o.Partition)
			if ps == nil || o.Err != nil || o.At < 0 {
				return
			}
			to, how := ps.translate(o.At)
			switch how {
			case pending:
				waiting = append(waiting, fmt.Sprintf("%s/%d@%d", o.Topic, o.Partition, o.At))
				return
			case beforeMap:
				var err error
				if to, err = m.translateByContent(ctx, ps, o.At); err != nil {
					failed = append(failed, err.Error())
					return
				}
			}
			if st.Offsets[o.Topic] == nil {
				st.Offsets[o.Topic] = map[int32]int64{}
			}
			st.Offsets[o.Topic][o.Partition] = to
			if prev, ok := m.groupWritten[g][o.Topic][o.Partition]; ok && prev == to {
				return // unchanged since the last write
			}
			out.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: to, LeaderEpoch: -1, Metadata: o.Metadata})
		})
		if len(waiting) > 0 || len(failed) > 0 {
			// A group is written whole or not at all: a consumer that
			// switched over must not find some partitions untranslated.
			st.Offsets = nil
			out = nil
		}
		if len(waiting) > 0 {
			sort.Strings(waiting)
			st.Skipped = "not yet copied past its committed offsets " + strings.Join(waiting, ", ") + " (written once the copy gets there)"
		}
		if len(failed) > 0 {
			st.Skipped = "some offsets not translated: " + strings.Join(failed, "; ")
		}
		if len(out) > 0 {
			rs, err := m.tgtAdm.CommitOffsets(ctx, g, out)
			if err == nil {
				err = rs.Error()
			}
			if err != nil {
				// A group that became active on the target refuses
				// commits from outside it: it owns its offsets now.
				if errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.RebalanceInProgress) {
					st.Skipped = "became active on the target; it owns its offsets there"
					m.groups[g] = st
					continue
				}
				return fmt.Errorf("mirror: writing group %s offsets to the target: %w", g, err)
			}
			out.Each(func(o kadm.Offset) {
				if m.groupWritten[g] == nil {
					m.groupWritten[g] = map[string]map[int32]int64{}
				}
				if m.groupWritten[g][o.Topic] == nil {
					m.groupWritten[g][o.Topic] = map[int32]int64{}
				}
				m.groupWritten[g][o.Topic][o.Partition] = o.At
			})
		}
		m.groups[g] = st
	}
	return nil
}

// committedElsewhere reports whether the target holds offsets for group g
// other than the ones this run last wrote.
func (m *mirror) committedElsewhere(ctx context.Context, g string) (bool, error) {
	written, ok := m.groupWritten[g]
	if !ok {
		return false, nil
	}
	cur, err := m.tgtAdm.FetchOffsets(ctx, g)
	if err != nil {
		return false, fmt.Errorf("mirror: fetching group %s offsets on the target: %w", g, err)
	}
	moved := false
	cur.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			return
		}
		if w, ok := written[o.Topic][o.Partition]; !ok || w != o.At {
			moved = true
		}
	})
	return moved, nil
}

// tick measures lag, translates groups and reports progress.
func (m *mirror) tick(ctx context.Context, final bool) error {
	actx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	names := sortedKeys(m.partitions)
	ends, err := m.srcAdm.ListEndOffsets(actx, names...)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if terr := m.checkSourceTopics(ctx); terr != nil {
			return terr
		}
		return fmt.Errorf("mirror: source end offsets: %w", err)
	}
	for _, t := range names {
		var lag int64
		for _, ps := range m.partitions[t] {
			lo, ok := ends.Lookup(t, ps.part)
			if !ok || errors.Is(lo.Err, kerr.UnknownTopicOrPartition) {
				if err := m.checkSourceTopics(ctx); err != nil {
					return err
				}
				continue
			}
			if lo.Err == nil && lo.Offset > ps.committed {
				lag += lo.Offset - ps.committed
			}
		}
		m.topicLag[t] = lag
		m.metrics.lag.WithLabelValues(t).Set(float64(lag))
	}
	if err := m.syncGroups(actx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	now := time.Now()
	if d := now.Sub(m.lastTick).Seconds(); d > 0 && !m.lastTick.IsZero() {
		m.rate = float64(m.records-m.lastRecords) / d
		m.byteRate = float64(m.bytes-m.lastBytes) / d
	}
	m.lastTick, m.lastRecords, m.lastBytes = now, m.records, m.bytes
	if m.cfg.Progress != nil {
		m.cfg.Progress(m.snapshot(final))
	}
	return nil
}

func (m *mirror) snapshot(final bool) Stats {
	s := Stats{
		Mode:          m.mode,
		Elapsed:       time.Since(m.start),
		Records:       m.records,
		Bytes:         m.bytes,
		RecordsPerSec: m.rate,
		BytesPerSec:   m.byteRate,
		Transactions:  m.txns,
		Topics:        map[string]TopicStats{},
		Groups:        map[string]GroupStats{},
		Final:         final,
	}
	if final && s.Elapsed > 0 {
		s.RecordsPerSec = float64(m.records) / s.Elapsed.Seconds()
		s.BytesPerSec = float64(m.bytes) / s.Elapsed.Seconds()
	}
	for t := range m.partitions {
		s.Topics[t] = TopicStats{Records: m.topicRecords[t], Bytes: m.topicBytes[t], Lag: m.topicLag[t]}
	}
	for g, st := range m.groups {
		s.Groups[g] = st
	}
	return s
}
