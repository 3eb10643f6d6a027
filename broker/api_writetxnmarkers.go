package broker

// WriteTxnMarkers v0-1.
//
// Behaviour:
//   - Writes a COMMIT or ABORT marker for a producer to each listed
//     partition through its acceptor, fsynced before the reply, as Kafka's
//     coordinator does for its own transactions; admin tooling uses it to
//     end a hanging transaction (kafka-transactions.sh abort). A partition
//     where the producer has no open transaction is left unchanged (no
//     error). The transaction coordinator's own state is not changed.
//   - Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION; a failed
//     partition KAFKA_STORAGE_ERROR. v2 (transaction version 2) is not
//     served.
//   - Authorization: CLUSTER_ACTION on the cluster (else
//     CLUSTER_AUTHORIZATION_FAILED on every partition).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.WriteTxnMarkers.Int16(), 0, 1, handleWriteTxnMarkers) }

func handleWriteTxnMarkers(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	ts := timeNowMs()
	allowed := r.allowedCluster(opClusterAction)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, idx := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = idx
				p := r.b.partition(t.Topic, idx)
				if !allowed {
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				} else if p == nil {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				} else {
					pend, err := p.EnqueueMarker(m.ProducerID, m.ProducerEpoch, m.Committed, m.ProducerEpoch, m.CoordinatorEpoch, ts)
					if err == nil {
						_, err = p.Wait(context.Background(), pend)
					}
					rp.ErrorCode = codeOf(err)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}
