package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSingleNodeAdminAPIs: AlterReplicaLogDirs, DescribeQuorum,
// UpdateFeatures, UnregisterBroker and the raft voter APIs answer as
// Kafka answers for a one-node cluster.
func TestSingleNodeAdminAPIs(t *testing.T) {
	tb := startTest(t)
	if err := tb.b.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, tb.addr)

	ar := kmsg.NewPtrAlterReplicaLogDirsRequest()
	ar.Version = 2
	ar.Dirs = []kmsg.AlterReplicaLogDirsRequestDir{
		{Dir: tb.b.logDir(), Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "t", Partitions: []int32{0, 5}}}},
		{Dir: "/somewhere/else", Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "t", Partitions: []int32{0}}}},
	}
	arr := c.roundTrip(ar).(*kmsg.AlterReplicaLogDirsResponse)
	if len(arr.Topics) != 2 || arr.Topics[0].Partitions[0].ErrorCode != 0 || arr.Topics[0].Partitions[1].ErrorCode != kerr.ReplicaNotAvailable.Code ||
		arr.Topics[1].Partitions[0].ErrorCode != kerr.LogDirNotFound.Code {
		t.Fatalf("AlterReplicaLogDirs: %+v", arr.Topics)
	}

	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.Version = 2
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	dqr := c.roundTrip(dq).(*kmsg.DescribeQuorumResponse)
	if dqr.ErrorCode != 0 || len(dqr.Topics) != 1 || len(dqr.Topics[0].Partitions) != 1 || len(dqr.Nodes) != 1 {
		t.Fatalf("DescribeQuorum: %+v", dqr)
	}
	if p := dqr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderID != 0 || len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != 0 || len(p.Observers) != 0 {
		t.Fatalf("DescribeQuorum partition: %+v", p)
	}
	if n := dqr.Nodes[0]; n.NodeID != 0 || len(n.Listeners) != 1 || n.Listeners[0].Name != "PLAINTEXT" {
		t.Fatalf("DescribeQuorum node: %+v", n)
	}
	dq.Topics[0].Topic = "other"
	if dqr := c.roundTrip(dq).(*kmsg.DescribeQuorumResponse); dqr.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("DescribeQuorum of another topic: %v", kerr.ErrorForCode(dqr.ErrorCode))
	}

	for _, tc := range []struct {
		version int16
		update  kmsg.UpdateFeaturesRequestFeatureUpdate
		code    *kerr.Error
	}{
		{1, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1}, nil},
		{1, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 1, UpgradeType: 2}, kerr.InvalidUpdateVersion},
		{2, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 27, UpgradeType: 1}, kerr.InvalidUpdateVersion},
		{2, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 9}, kerr.InvalidRequest},
	} {
		uf := kmsg.NewPtrUpdateFeaturesRequest()
		uf.Version = tc.version
		uf.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{tc.update}
		r := c.roundTrip(uf).(*kmsg.UpdateFeaturesResponse)
		code := r.ErrorCode
		if tc.version < 2 && len(r.Results) == 1 {
			code = r.Results[0].ErrorCode
		}
		if want := int16(0); tc.code != nil {
			want = tc.code.Code
			if code != want {
				t.Errorf("UpdateFeatures v%d %+v: %v, want %v", tc.version, tc.update, kerr.ErrorForCode(code), tc.code)
			}
		} else if code != 0 {
			t.Errorf("UpdateFeatures v%d %+v: %v", tc.version, tc.update, kerr.ErrorForCode(code))
		}
	}

	ub := kmsg.NewPtrUnregisterBrokerRequest()
	ub.BrokerID = 3
	if r := c.roundTrip(ub).(*kmsg.UnregisterBrokerResponse); r.ErrorCode != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("UnregisterBroker 3: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	ub.BrokerID = 0
	if r := c.roundTrip(ub).(*kmsg.UnregisterBrokerResponse); r.ErrorCode != 0 {
		t.Fatalf("UnregisterBroker 0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.roundTrip(kmsg.NewPtrAddRaftVoterRequest()).(*kmsg.AddRaftVoterResponse); r.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("AddRaftVoter: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.roundTrip(kmsg.NewPtrRemoveRaftVoterRequest()).(*kmsg.RemoveRaftVoterResponse); r.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("RemoveRaftVoter: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
