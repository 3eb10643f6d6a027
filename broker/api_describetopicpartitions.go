package broker

// DescribeTopicPartitions v0 (KIP-966), what admin clients and
// kafka-topics --describe use in place of Metadata.
//
// Behaviour (as Kafka's handler):
//   - An empty topic list describes every topic the principal may
//     DESCRIBE, __consumer_offsets included (IsInternal set); a named
//     topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION, one the
//     principal may not DESCRIBE TOPIC_AUTHORIZATION_FAILED (listed after
//     the others, never disclosing whether it exists).
//   - Topics are answered in name order from the cursor: topics before
//     the cursor's are skipped, and the cursor's topic starts at its
//     partition. A named list must contain the cursor's topic, and the
//     cursor's partition must not be negative (else INVALID_REQUEST on
//     every topic named).
//   - At most ResponsePartitionLimit partitions (clamped to 1-2000, as
//     Kafka's max.request.partition.size.limit) are answered; when more
//     remain, NextCursor names the first left out.
//   - Every partition is led by node 0, its only replica and ISR member,
//     at leader epoch 0; eligible leader replicas and offline replicas are
//     empty. Each answered topic carries its authorized operations
//     (KIP-430).

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.DescribeTopicPartitions.Int16(), 0, 0, handleDescribeTopicPartitions)
}

// maxDescribePartitions is Kafka's max.request.partition.size.limit
// default: the most partitions one DescribeTopicPartitions answers.
const maxDescribePartitions = 2000

func handleDescribeTopicPartitions(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	all := len(req.Topics) == 0
	from, fromPart := "", int32(0)
	if req.Cursor != nil {
		from, fromPart = req.Cursor.Topic, req.Cursor.Partition
	}
	var names []string
	if all {
		for _, t := range r.b.sortedTopics() {
			names = append(names, t.name)
		}
	} else {
		for _, rt := range req.Topics {
			names = append(names, rt.Topic)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	names = slices.DeleteFunc(names, func(n string) bool { return n < from })
	invalid := ""
	switch {
	case req.Cursor != nil && !all && !slices.Contains(names, from):
		invalid = "the topic list must contain the cursor's topic " + from
	case req.Cursor != nil && fromPart < 0:
		invalid = "the cursor's partition must not be negative"
	}
	if invalid != "" {
		for _, rt := range req.Topics {
			st := kmsg.NewDescribeTopicPartitionsResponseTopic()
			st.Topic, st.ErrorCode = strPtr(rt.Topic), kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	remaining := min(max(req.ResponsePartitionLimit, 1), maxDescribePartitions)
	for _, name := range names {
		if !r.allowed(opDescribe, resTopic, name) {
			if !all {
				st := kmsg.NewDescribeTopicPartitionsResponseTopic()
				st.Topic, st.ErrorCode = strPtr(name), kerr.TopicAuthorizationFailed.Code
				denied = append(denied, st)
			}
			continue
		}
		if resp.NextCursor != nil {
			continue // past the limit: only the denied are still listed
		}
		start := int32(0)
		if name == from {
			start = fromPart
		}
		if remaining == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: start}
			continue
		}
		mt, ok := describedTopic(r.b, name)
		if !ok {
			st := kmsg.NewDescribeTopicPartitionsResponseTopic()
			st.Topic, st.ErrorCode = strPtr(name), kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st := kmsg.NewDescribeTopicPartitionsResponseTopic()
		st.Topic, st.TopicID, st.IsInternal = mt.Topic, mt.TopicID, mt.IsInternal
		st.AuthorizedOperations = r.authorizedOps(resTopic, name)
		for _, mp := range mt.Partitions {
			if mp.Partition < start {
				continue
			}
			if remaining == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: mp.Partition}
				break
			}
			remaining--
			sp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			sp.Partition, sp.LeaderID, sp.LeaderEpoch = mp.Partition, mp.Leader, mp.LeaderEpoch
			sp.Replicas, sp.ISR = mp.Replicas, mp.ISR
			sp.EligibleLeaderReplicas, sp.LastKnownELR, sp.OfflineReplicas = []int32{}, []int32{}, []int32{}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}

// describedTopic is the Metadata view of the named topic, internal or
// not, with its partitions in index order; false when it does not exist.
func describedTopic(b *Broker, name string) (kmsg.MetadataResponseTopic, bool) {
	if t := b.lookup(name); t != nil {
		return metadataTopic(t), true
	}
	return kmsg.MetadataResponseTopic{}, false
}
