package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Manual replica assignments (CreateTopics' ReplicaAssignment,
// CreatePartitions' Assignment), checked as Kafka's controller checks
// them, for a cluster whose only broker is nodeID: every replica list
// must be [nodeID]. A list naming another broker gets
// INVALID_REPLICA_ASSIGNMENT naming it; an empty list, a broker named
// twice or lists of different lengths get INVALID_REPLICA_ASSIGNMENT too.

// checkReplicas checks one partition's replica list.
func checkReplicas(replicas []int32) error {
	if len(replicas) == 0 {
		return errCode(kerr.InvalidReplicaAssignment, "the manual partition assignment includes an empty replica list")
	}
	for i, id := range replicas {
		if slices.Contains(replicas[:i], id) {
			return errCode(kerr.InvalidReplicaAssignment, "the manual partition assignment includes broker %d more than once", id)
		}
		if id != nodeID {
			return errCode(kerr.InvalidReplicaAssignment, "the manual partition assignment includes broker %d, but no such broker is registered (this cluster's only broker is %d)", id, nodeID)
		}
	}
	return nil
}

// topicAssignment checks a CreateTopics assignment and returns the
// partition count it sets. Kafka requires NumPartitions and
// ReplicationFactor -1 with an assignment (else INVALID_REQUEST) and
// partition indexes 0 to n-1.
func topicAssignment(rt kmsg.CreateTopicsRequestTopic) (int32, error) {
	if rt.ReplicationFactor != -1 {
		return 0, errCode(kerr.InvalidRequest, "a manual partition assignment was specified, but the replication factor was not set to -1")
	}
	if rt.NumPartitions != -1 {
		return 0, errCode(kerr.InvalidRequest, "a manual partition assignment was specified, but the number of partitions was not set to -1")
	}
	seen := make([]bool, len(rt.ReplicaAssignment))
	for _, a := range rt.ReplicaAssignment {
		if a.Partition < 0 || int(a.Partition) >= len(seen) || seen[a.Partition] {
			return 0, errCode(kerr.InvalidReplicaAssignment, "the manual partition assignment's partitions must be a consecutive sequence from 0; partition %d is not", a.Partition)
		}
		seen[a.Partition] = true
		if err := checkReplicas(a.Replicas); err != nil {
			return 0, err
		}
	}
	return int32(len(rt.ReplicaAssignment)), nil
}

// partitionsAssignment checks a CreatePartitions assignment for a topic
// that has `have` partitions and is to have count: one replica list per
// new partition, each of the topic's replication factor (1).
func partitionsAssignment(have, count int32, as []kmsg.CreatePartitionsRequestTopicAssignment) error {
	if add := count - have; add > 0 && int(add) != len(as) {
		return errCode(kerr.InvalidReplicaAssignment, "attempted to add %d additional partition(s), but %d assignment(s) were specified", add, len(as))
	}
	for _, a := range as {
		if len(a.Replicas) > 1 {
			return errCode(kerr.InvalidReplicaAssignment, "the manual partition assignment includes a partition with %d replicas, but this is not consistent with previous partitions, which have 1 replica", len(a.Replicas))
		}
		if err := checkReplicas(a.Replicas); err != nil {
			return err
		}
	}
	return nil
}
