package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// grants is an authorizer that allows exactly the listed operations.
type grants map[opRes]bool

func (g grants) Authorize(_, _ string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, _ string) bool {
	return g[opRes{op, rt}]
}

func opBits(ops ...kmsg.ACLOperation) int32 {
	var b int32
	for _, op := range ops {
		b |= 1 << uint(op)
	}
	return b
}

// TestAuthorizedOperations: Metadata, DescribeCluster and DescribeGroups
// answer KIP-430's bitfields when asked, -2147483648 when not, and all of
// a resource's operations with authorization off.
func TestAuthorizedOperations(t *testing.T) {
	const notAsked = -2147483648
	allTopic := opBits(opRead, opWrite, opCreate, opDescribe, opDelete, opAlter, opDescribeConfigs, opAlterConfigs)
	allCluster := opBits(opCreate, opClusterAction, opDescribeConfigs, opAlterConfigs, opIdempotentWrite, opAlter, opDescribe)
	allGroup := opBits(opRead, opDescribe, opDelete, opDescribeConfigs, opAlterConfigs)
	cases := []struct {
		name                string
		authz               authorizer // nil: authorization off
		topic, cluster, grp int32
	}{
		{"off", nil, allTopic, allCluster, allGroup},
		{"some", grants{
			{opDescribe, resTopic}: true, {opRead, resTopic}: true,
			{opDescribe, resCluster}: true,
			{opDescribe, resGroup}:   true, {opDelete, resGroup}: true,
		}, opBits(opDescribe, opRead), opBits(opDescribe), opBits(opDescribe, opDelete)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(DataDir(t.TempDir()), ListenAddr("127.0.0.1:0"), Authorization(tc.authz != nil))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if tc.authz != nil {
				b.authz = tc.authz // before Start: no goroutine reads it yet
			}
			if err := b.Start(); err != nil {
				t.Fatal(err)
			}
			if err := b.CreateTopic(t.Context(), "t", 1, nil); err != nil {
				t.Fatal(err)
			}
			c := dialRaw(t, b.Addr())
			name := "t"
			for _, ask := range []bool{false, true} {
				md := kmsg.NewPtrMetadataRequest()
				md.SetVersion(10)
				md.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
				md.IncludeTopicAuthorizedOperations, md.IncludeClusterAuthorizedOperations = ask, ask
				mr := c.roundTrip(md).(*kmsg.MetadataResponse)
				wantTopic, wantCluster := int32(notAsked), int32(notAsked)
				if ask {
					wantTopic, wantCluster = tc.topic, tc.cluster
				}
				if len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != 0 {
					t.Fatalf("metadata topics: %+v", mr.Topics)
				}
				if got := mr.Topics[0].AuthorizedOperations; got != wantTopic {
					t.Errorf("ask=%v: topic authorized operations %b, want %b", ask, got, wantTopic)
				}
				if got := mr.AuthorizedOperations; got != wantCluster {
					t.Errorf("ask=%v: metadata cluster authorized operations %b, want %b", ask, got, wantCluster)
				}

				dc := kmsg.NewPtrDescribeClusterRequest()
				dc.SetVersion(0)
				dc.IncludeClusterAuthorizedOperations = ask
				dr := c.roundTrip(dc).(*kmsg.DescribeClusterResponse)
				if dr.ErrorCode != 0 {
					t.Fatalf("describe cluster: error %d", dr.ErrorCode)
				}
				if got := dr.ClusterAuthorizedOperations; got != wantCluster {
					t.Errorf("ask=%v: describe cluster authorized operations %b, want %b", ask, got, wantCluster)
				}

				dg := kmsg.NewPtrDescribeGroupsRequest()
				dg.SetVersion(5)
				dg.Groups = []string{"g"}
				dg.IncludeAuthorizedOperations = ask
				gr := c.roundTrip(dg).(*kmsg.DescribeGroupsResponse)
				wantGroup := int32(notAsked)
				if ask {
					wantGroup = tc.grp
				}
				if len(gr.Groups) != 1 || gr.Groups[0].ErrorCode != 0 {
					t.Fatalf("describe groups: %+v", gr.Groups)
				}
				if got := gr.Groups[0].AuthorizedOperations; got != wantGroup {
					t.Errorf("ask=%v: group authorized operations %b, want %b", ask, got, wantGroup)
				}
			}
		})
	}
}
