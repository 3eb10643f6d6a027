package broker

// ListOffsets v0-10.
//
// Behaviour:
//   - Timestamp -2 (earliest) and -4 (earliest local, v8+; nothing is
//     tiered, so it is the log start offset too): the log start offset.
//     -5 (latest tiered, v9+, KIP-1005): offset -1, as Kafka answers for
//     a topic without remote storage. v10's TimeoutMillis bounds remote
//     reads, of which there are none. -1 (latest): the high watermark, or with IsolationLevel 1
//     (read_committed) the last stable offset. -3 (max timestamp, v7+):
//     the offset and timestamp of the record with the largest timestamp
//     below the high watermark (the last stable offset for
//     read_committed); timestamp lookups likewise.
//   - Any other timestamp t: the first offset whose record has a
//     timestamp >= t, with that timestamp; -1 and -1 when none does
//     below the high watermark. The storage time index finds the batch;
//     in an uncompressed batch the record itself is found by reading its
//     record headers, in a compressed one the batch's first offset and
//     max timestamp are returned.
//   - v0 (old clients such as sarama configured for Kafka 0.10.0)
//     answers in OldStyleOffsets with the one offset found (MaxNumOffsets
//     of 0 gets none); a timestamp with no offset at or after it gets an
//     empty list.
//   - Needs DESCRIBE on each topic (else TOPIC_AUTHORIZATION_FAILED).
//   - Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION. The
//     leader epoch is always 0; CurrentLeaderEpoch is not checked.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/storage"
)

func init() { register(kmsg.ListOffsets.Int16(), 0, 10, handleListOffsets) }

func handleListOffsets(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.ListOffsetsResponseTopic{Topic: rt.Topic}
		t := r.b.lookup(rt.Topic)
		denied := !r.allowed(opDescribe, resTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			if denied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				off, ts, err := listOffset(t.parts[rp.Partition], rp.Timestamp, req.IsolationLevel == 1)
				if err != nil {
					sp.ErrorCode = codeOf(err)
				} else {
					sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, ts, 0
					if req.Version == 0 && off >= 0 && rp.MaxNumOffsets > 0 {
						sp.OldStyleOffsets = []int64{off}
					}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// listOffset answers one partition of a ListOffsets request.
func listOffset(p *partition.Partition, ts int64, committed bool) (offset, timestamp int64, err error) {
	hw := p.HighWatermark()
	if committed {
		hw = p.LastStableOffsetAt(hw)
	}
	switch ts {
	case -2, -4:
		return p.Log().StartOffset(), -1, nil
	case -1:
		return hw, -1, nil
	case -5:
		return -1, -1, nil
	case -3:
		maxTs, off := p.Log().MaxTimestamp()
		if off < 0 || off >= hw {
			return -1, -1, nil
		}
		off = max(off, p.Log().StartOffset())
		found, at, err := findRecord(p, off, hw, func(rts int64) bool { return rts == maxTs })
		if err != nil {
			return 0, 0, err
		}
		if found < 0 {
			return off, maxTs, nil
		}
		return found, at, nil
	}
	if ts < 0 {
		return 0, 0, errCode(kerr.InvalidRequest, "timestamp %d is not a ListOffsets target", ts)
	}
	off, err := p.Log().OffsetForTime(ts)
	if err != nil {
		return 0, 0, storageErr(err)
	}
	off = max(off, p.Log().StartOffset()) // DeleteRecords may have cut into the batch found
	if off >= hw {
		return -1, -1, nil
	}
	found, at, err := findRecord(p, off, hw, func(rts int64) bool { return rts >= ts })
	if err != nil {
		return 0, 0, err
	}
	if found < 0 || found >= hw {
		return -1, -1, nil
	}
	return found, at, nil
}

func storageErr(err error) error {
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return errCode(kerr.OffsetOutOfRange, "%v", err)
	case errors.Is(err, storage.ErrClosed):
		return errCode(kerr.NotLeaderForPartition, "%v", err)
	}
	return errCode(kerr.KafkaStorageError, "%v", err)
}

// findRecord reads the batch holding offset and returns the offset and
// timestamp of its first record whose timestamp satisfies match. For a
// compressed batch it returns the batch's base offset and max timestamp
// when the batch's max timestamp matches. (-1, -1) when nothing matches.
func findRecord(p *partition.Partition, offset, hw int64, match func(int64) bool) (int64, int64, error) {
	s, err := p.Log().Read(offset, hw, 1)
	if err != nil {
		return 0, 0, storageErr(err)
	}
	raw, err := s.Bytes()
	if err != nil {
		return 0, 0, storageErr(err)
	}
	if len(raw) == 0 {
		return -1, -1, nil
	}
	h, err := batch.Validate(raw)
	if err != nil {
		return 0, 0, errCode(kerr.KafkaStorageError, "stored batch at offset %d: %v", offset, err)
	}
	if h.Compression() != 0 {
		if match(h.MaxTimestamp) {
			return h.BaseOffset, h.MaxTimestamp, nil
		}
		return -1, -1, nil
	}
	off, ts := int64(-1), int64(-1)
	err = batch.Records(&h, raw, func(r *batch.Record) error {
		if match(r.Timestamp) {
			off, ts = h.BaseOffset+int64(r.OffsetDelta), r.Timestamp
			return errFound
		}
		return nil
	})
	if err != nil && err != errFound {
		return 0, 0, errCode(kerr.KafkaStorageError, "stored batch at offset %d: %v", offset, err)
	}
	return off, ts, nil
}

// errFound stops batch.Records at the record findRecord looks for.
var errFound = errors.New("found")
