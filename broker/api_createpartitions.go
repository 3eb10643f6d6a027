package broker

// CreatePartitions v0-3.
//
// Behaviour:
//   - Grows a topic to Count partitions; the new partitions' directories
//     are created before the topic's metadata (fsynced) names them.
//   - Fewer or equally many partitions get INVALID_PARTITIONS; a manual
//     assignment must give each new partition the replica list [0] (this
//     broker), else INVALID_REPLICA_ASSIGNMENT naming the node or the
//     mismatch (replicaassign.go); an unknown topic
//     UNKNOWN_TOPIC_OR_PARTITION; a topic named twice INVALID_REQUEST.
//   - ValidateOnly checks without changing anything.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.CreatePartitions.Int16(), 0, 3, handleCreatePartitions) }

func handleCreatePartitions(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case !r.allowed(opAlter, resTopic, rt.Topic):
			err = errCode(kerr.TopicAuthorizationFailed, "not authorized to alter topic %q", rt.Topic)
		case seen[rt.Topic] > 1:
			err = errCode(kerr.InvalidRequest, "topic %q appears more than once in the request", rt.Topic)
		case len(rt.Assignment) > 0 && r.b.lookup(rt.Topic) != nil:
			if err = partitionsAssignment(int32(len(r.b.lookup(rt.Topic).parts)), rt.Count, rt.Assignment); err == nil {
				err = r.addPartitionsQuota(rt.Topic, rt.Count, req.ValidateOnly, req.Version >= 3)
			}
		default:
			err = r.addPartitionsQuota(rt.Topic, rt.Count, req.ValidateOnly, req.Version >= 3)
		}
		if err != nil {
			st.ErrorCode = codeOf(err)
			msg := errMessage(err)
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
