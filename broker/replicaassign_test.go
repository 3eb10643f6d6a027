package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestManualReplicaAssignment: CreateTopics and CreatePartitions accept
// assignments that name only this broker (node 0), as monitoring tools
// send them for their probe topics, and refuse any other node with
// INVALID_REPLICA_ASSIGNMENT naming it. kadm sees the result.
func TestManualReplicaAssignment(t *testing.T) {
	tb := startTest(t)
	ctx := t.Context()
	cl := tb.client()
	adm := kadm.NewClient(cl)
	create := func(name string, rf int16, parts int32, assign ...[]int32) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.ReplicationFactor, rt.NumPartitions = name, rf, parts
		for i, rs := range assign {
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(i), Replicas: rs})
		}
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0]
	}
	if st := create("probe", -1, -1, []int32{0}, []int32{0}); st.ErrorCode != 0 {
		t.Fatalf("create [[0] [0]]: %v %s", kerr.ErrorForCode(st.ErrorCode), ptrStr(st.ErrorMessage))
	}
	td, err := adm.ListTopics(ctx, "probe")
	if err != nil || td["probe"].Err != nil || len(td["probe"].Partitions) != 2 {
		t.Fatalf("kadm sees %+v, %v", td, err)
	}
	for _, p := range td["probe"].Partitions {
		if len(p.Replicas) != 1 || p.Replicas[0] != 0 {
			t.Fatalf("partition %d replicas %v", p.Partition, p.Replicas)
		}
	}
	for _, tc := range []struct {
		name   string
		rf     int16
		parts  int32
		assign [][]int32
		code   *kerr.Error
		msg    string
	}{
		{"other-node", -1, -1, [][]int32{{1}}, kerr.InvalidReplicaAssignment, "broker 1"},
		{"other-replica", -1, -1, [][]int32{{0, 2}}, kerr.InvalidReplicaAssignment, "broker 2"},
		{"twice", -1, -1, [][]int32{{0, 0}}, kerr.InvalidReplicaAssignment, "more than once"},
		{"empty", -1, -1, [][]int32{{}}, kerr.InvalidReplicaAssignment, "empty replica list"},
		{"with-rf", 1, -1, [][]int32{{0}}, kerr.InvalidRequest, "replication factor"},
		{"with-count", -1, 1, [][]int32{{0}}, kerr.InvalidRequest, "number of partitions"},
	} {
		st := create(tc.name, tc.rf, tc.parts, tc.assign...)
		if st.ErrorCode != tc.code.Code || !strings.Contains(ptrStr(st.ErrorMessage), tc.msg) {
			t.Errorf("%s: %v %q, want %v containing %q", tc.name, kerr.ErrorForCode(st.ErrorCode), ptrStr(st.ErrorMessage), tc.code, tc.msg)
		}
		if strings.Contains(ptrStr(st.ErrorMessage), tc.code.Message) {
			t.Errorf("%s: the message %q repeats the code name", tc.name, ptrStr(st.ErrorMessage))
		}
	}
	if tb.b.lookup("other-node") != nil {
		t.Fatal("a refused assignment created its topic")
	}

	grow := func(count int32, assign ...[]int32) kmsg.CreatePartitionsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "probe", count
		for _, rs := range assign {
			rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: rs})
		}
		req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0]
	}
	if st := grow(4, []int32{0}, []int32{3}); st.ErrorCode != kerr.InvalidReplicaAssignment.Code || !strings.Contains(ptrStr(st.ErrorMessage), "broker 3") {
		t.Fatalf("grow naming broker 3: %v %q", kerr.ErrorForCode(st.ErrorCode), ptrStr(st.ErrorMessage))
	}
	if st := grow(4, []int32{0}); st.ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("grow by 2 with 1 assignment: %v %q", kerr.ErrorForCode(st.ErrorCode), ptrStr(st.ErrorMessage))
	}
	if st := grow(4, []int32{0}, []int32{0}); st.ErrorCode != 0 {
		t.Fatalf("grow [[0] [0]]: %v %q", kerr.ErrorForCode(st.ErrorCode), ptrStr(st.ErrorMessage))
	}
	td, err = adm.ListTopics(ctx, "probe")
	if err != nil || len(td["probe"].Partitions) != 4 {
		t.Fatalf("after growing: %+v, %v", td, err)
	}
	// kadm's own error text carries the code once.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "probe"); !errors.Is(err, kerr.TopicAlreadyExists) || strings.Count(err.Error(), "TOPIC_ALREADY_EXISTS") != 1 {
		t.Fatalf("create again: %v", err)
	}
}
