package broker

// DescribeProducers v0.
//
// Behaviour:
//   - For each partition: the producers (idempotent or transactional)
//     with state on it: producer id, epoch, last sequence written (-1
//     when none in this epoch) and the first offset of the producer's
//     open transaction on the partition (-1 when none). LastTimestamp is,
//     as in Kafka, the max timestamp of the producer's last batch or
//     transaction marker on the partition (-1 when unknown: state
//     restored from a producer snapshot older than the field, nothing
//     written since); sluice txn find-hanging ages an open transaction
//     by it, as kafka-transactions.sh does. CoordinatorEpoch is the
//     coordinator epoch of the producer's last transaction marker on the
//     partition (0 for the broker's own coordinator, the request's for
//     WriteTxnMarkers), -1 when none was written, as in Kafka.
//   - Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION.
//   - Authorization: READ on each topic (else
//     TOPIC_AUTHORIZATION_FAILED).

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeProducers.Int16(), 0, 0, handleDescribeProducers) }

func handleDescribeProducers(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		denied := !r.allowed(opRead, resTopic, rt.Topic)
		for _, idx := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			p := r.b.partition(rt.Topic, idx)
			if denied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if p == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			act := p.Producers()
			sort.Slice(act, func(i, j int) bool { return act[i].ID < act[j].ID })
			for _, a := range act {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = a.ID, int32(a.Epoch), a.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch = a.LastTimestamp, a.CoordinatorEpoch
				ap.CurrentTxnStartOffset = a.TxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
