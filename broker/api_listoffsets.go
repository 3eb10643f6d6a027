package broker

// ListOffsets v0-8.
//
// Behaviour:
//   - Timestamp -2 (earliest) and -4 (earliest local, v8): the log start
//     offset. -1 (latest): the high watermark, or with IsolationLevel 1
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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ListOffsets.Int16(), 0, 8, handleListOffsets) }

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
				off, ts, err := t.parts[rp.Partition].ListOffset(rp.Timestamp, req.IsolationLevel == 1)
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
