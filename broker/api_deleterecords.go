package broker

// DeleteRecords v0-2.
//
// Behaviour:
//   - Moves each partition's log start offset up to the requested
//     offset (-1: the high watermark). The new start is fsynced to the
//     partition's log-start-offset file before the reply, so it survives
//     a crash. Fetches below it get OFFSET_OUT_OF_RANGE and ListOffsets
//     earliest returns it; segments wholly below it are removed at the
//     next retention check.
//   - An offset past the high watermark or below -1 gets
//     OFFSET_OUT_OF_RANGE; an offset at or below the current start
//     changes nothing. LowWatermark is the start after the call.
//   - Unknown topics and partitions get UNKNOWN_TOPIC_OR_PARTITION.
//     TimeoutMillis is not needed (the reply waits for the fsync only).
//   - Authorization: DELETE on each topic (else
//     TOPIC_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DeleteRecords.Int16(), 0, 2, handleDeleteRecords) }

func handleDeleteRecords(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t := r.b.lookup(rt.Topic)
		denied := !r.allowed(opDelete, resTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			if denied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				low, err := t.parts[rp.Partition].DeleteRecords(rp.Offset)
				sp.LowWatermark, sp.ErrorCode = low, codeOf(err)
				if err != nil {
					r.b.cfg.logger.Debug("delete records refused", "topic", rt.Topic, "partition", rp.Partition, "err", err)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
