package mirror

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The copy position of a partition is stored on the target as the
// committed offset (the next source offset to copy) of the mirror's group,
// with metadata "sluice-mirror t=<target offset after the copied records>".
const positionMetaPrefix = "sluice-mirror t="

func positionMeta(tgtNext int64) string {
	return positionMetaPrefix + strconv.FormatInt(tgtNext, 10)
}

func parsePositionMeta(s string) (int64, bool) {
	v, ok := strings.CutPrefix(s, positionMetaPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 0
}

// position is a stored copy position.
type position struct {
	src, tgt int64
}

// fetchPositions reads the mirror group's committed offsets on the target,
// waiting out offsets of a transaction still being completed
// (UNSTABLE_OFFSET_COMMIT), so a restart never reads a position a
// committing transaction is about to replace.
func (m *mirror) fetchPositions(ctx context.Context, topics []string) (map[string]map[int32]position, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	for {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = m.cfg.Name
		req.RequireStable = true
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = m.cfg.Name
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic = t
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic = t
			for p := range m.partitions[t] {
				rt.Partitions = append(rt.Partitions, int32(p))
				gt.Partitions = append(gt.Partitions, int32(p))
			}
			req.Topics = append(req.Topics, rt)
			g.Topics = append(g.Topics, gt)
		}
		req.Groups = []kmsg.OffsetFetchRequestGroup{g}
		resp, err := req.RequestWith(ctx, m.tgt)
		if err != nil {
			return nil, fmt.Errorf("mirror: reading the copy position (group %s) on the target: %w", m.cfg.Name, err)
		}
		out, unstable, err := parseOffsetFetch(resp)
		if err != nil {
			return nil, fmt.Errorf("mirror: reading the copy position (group %s) on the target: %w", m.cfg.Name, err)
		}
		if !unstable {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("mirror: the target keeps the copy position (group %s) unstable (a transaction is still completing): %w", m.cfg.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func parseOffsetFetch(resp *kmsg.OffsetFetchResponse) (map[string]map[int32]position, bool, error) {
	out := map[string]map[int32]position{}
	unstable := false
	add := func(t string, p int32, off int64, meta *string, code int16) error {
		if code == kerr.UnstableOffsetCommit.Code {
			unstable = true
			return nil
		}
		if err := kerr.ErrorForCode(code); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return nil
			}
			return fmt.Errorf("%s/%d: %w", t, p, err)
		}
		if off < 0 {
			return nil
		}
		var tgt int64 = -1
		if meta != nil {
			if n, ok := parsePositionMeta(*meta); ok {
				tgt = n
			}
		}
		if tgt < 0 {
			return fmt.Errorf("%s/%d: committed offset %d has no mirror position metadata (is another program committing to this group?)", t, p, off)
		}
		if out[t] == nil {
			out[t] = map[int32]position{}
		}
		out[t][p] = position{src: off, tgt: tgt}
		return nil
	}
	noGroup := func(code int16) bool { return code == kerr.GroupIDNotFound.Code } // no position stored yet
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !noGroup(resp.ErrorCode) {
		return nil, false, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := add(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode); err != nil {
				return nil, false, err
			}
		}
	}
	for _, g := range resp.Groups {
		if noGroup(g.ErrorCode) {
			continue
		}
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, false, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if err := add(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode); err != nil {
					return nil, false, err
				}
			}
		}
	}
	return out, unstable, nil
}

// loadPositions sets every partition's starting point: the stored
// position, or the source start offset (stored at once, so a mirror
// killed before its first commit resumes from a known target offset).
func (m *mirror) loadPositions(ctx context.Context, plan *topicPlan) error {
	names := plan.names()
	stored, err := m.fetchPositions(ctx, names)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	srcStart, err := m.srcAdm.ListStartOffsets(lctx, names...)
	if err == nil {
		err = srcStart.Error()
	}
	if err != nil {
		return fmt.Errorf("mirror: source start offsets: %w", err)
	}
	srcEnd, err := m.srcAdm.ListEndOffsets(lctx, names...)
	if err == nil {
		err = srcEnd.Error()
	}
	if err != nil {
		return fmt.Errorf("mirror: source end offsets: %w", err)
	}
	tgtEnd, err := m.targetEnds(lctx, names)
	if err != nil {
		return err
	}
	if m.mode == IdempotentCheckpoint && len(stored) > 0 {
		// Without transactions, writes of a killed run still in flight
		// would land after the count below: wait until the target's end
		// offsets stay put for settleTime.
		for {
			select {
			case <-lctx.Done():
				return fmt.Errorf("mirror: the target's end offsets keep moving; is another program writing to the mirrored topics? %w", lctx.Err())
			case <-time.After(settleTime):
			}
			again, err := m.targetEnds(lctx, names)
			if err != nil {
				return err
			}
			if sameOffsets(tgtEnd, again) {
				break
			}
			tgtEnd = again
		}
	}
	initial := kadm.Offsets{}
	for _, t := range names {
		for p, ps := range m.partitions[t] {
			start, _ := srcStart.Lookup(t, int32(p))
			end, _ := srcEnd.Lookup(t, int32(p))
			tend, _ := tgtEnd.Lookup(t, int32(p))
			ps.end = end.Offset
			if pos, ok := stored[t][int32(p)]; ok {
				m.report.Resumed = true
				ps.startSrc, ps.startTgt = pos.src, pos.tgt
				if start.Offset > pos.src {
					m.log.Warn("mirror: source records past the copy position were deleted before they were copied (retention)",
						"topic", t, "partition", p, "position", pos.src, "source_start", start.Offset)
				}
				if m.mode == IdempotentCheckpoint {
					if tend.Offset < pos.tgt {
						return fmt.Errorf("mirror: target %s/%d ends at offset %d, before the stored copy position's target offset %d: was the target topic recreated? delete the group %s on the target to start over",
							t, p, tend.Offset, pos.tgt, m.cfg.Name)
					}
					ps.skip = tend.Offset - pos.tgt
				}
			} else {
				ps.fresh = true
				ps.startSrc, ps.startTgt = start.Offset, tend.Offset
				initial.Add(kadm.Offset{Topic: t, Partition: int32(p), At: start.Offset, LeaderEpoch: -1, Metadata: positionMeta(tend.Offset)})
			}
			ps.pos, ps.committed, ps.tgtNext = ps.startSrc, ps.startSrc, ps.startTgt
		}
	}
	if len(initial) > 0 {
		rs, err := m.tgtAdm.CommitOffsets(lctx, m.cfg.Name, initial)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			return fmt.Errorf("mirror: storing the initial copy position (group %s) on the target: %w", m.cfg.Name, err)
		}
	}
	return nil
}

// settleTime is how long the target's end offsets must stay put before a
// restart without transactions counts what a killed run wrote.
const settleTime = 500 * time.Millisecond

func sameOffsets(a, b kadm.ListedOffsets) bool {
	same := len(a) == len(b)
	a.Each(func(o kadm.ListedOffset) {
		if p, ok := b.Lookup(o.Topic, o.Partition); !ok || p.Offset != o.Offset {
			same = false
		}
	})
	return same
}

// targetEnds lists the target's end offsets, retrying while topics just
// created are not yet served everywhere.
func (m *mirror) targetEnds(ctx context.Context, names []string) (kadm.ListedOffsets, error) {
	for {
		ends, err := m.tgtAdm.ListEndOffsets(ctx, names...)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			return ends, nil
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) && !errors.Is(err, kerr.NotLeaderForPartition) {
			return nil, fmt.Errorf("mirror: target end offsets: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("mirror: target end offsets: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
