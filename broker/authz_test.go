package broker

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/auth"
)

// kafkaACLTable is Kafka's documented authorizer table ("Operations and
// Resources on Protocols" in Kafka's security documentation), for every
// API Kafka clients send, whether or not Sluice serves it yet: an API
// that lands later is checked against its row here. nil: no check.
var kafkaACLTable = map[kmsg.Key][]aclNeed{
	kmsg.Produce:                      {{opWrite, resTopic, ""}, {opWrite, resTxnID, ""}},
	kmsg.Fetch:                        {{opRead, resTopic, ""}, {opClusterAction, resCluster, ""}},
	kmsg.ListOffsets:                  {{opDescribe, resTopic, ""}},
	kmsg.Metadata:                     {{opDescribe, resTopic, ""}, {opCreate, resCluster, ""}, {opCreate, resTopic, ""}},
	kmsg.OffsetCommit:                 {{opRead, resGroup, ""}, {opRead, resTopic, ""}},
	kmsg.OffsetFetch:                  {{opDescribe, resGroup, ""}, {opDescribe, resTopic, ""}},
	kmsg.FindCoordinator:              {{opDescribe, resGroup, ""}, {opDescribe, resTxnID, ""}},
	kmsg.JoinGroup:                    {{opRead, resGroup, ""}},
	kmsg.Heartbeat:                    {{opRead, resGroup, ""}},
	kmsg.LeaveGroup:                   {{opRead, resGroup, ""}},
	kmsg.SyncGroup:                    {{opRead, resGroup, ""}},
	kmsg.DescribeGroups:               {{opDescribe, resGroup, ""}},
	kmsg.ListGroups:                   {{opDescribe, resCluster, ""}, {opDescribe, resGroup, ""}},
	kmsg.SASLHandshake:                nil,
	kmsg.ApiVersions:                  nil,
	kmsg.CreateTopics:                 {{opCreate, resCluster, ""}, {opCreate, resTopic, ""}, {opDescribeConfigs, resTopic, ""}},
	kmsg.DeleteTopics:                 {{opDelete, resTopic, ""}, {opDescribe, resTopic, ""}},
	kmsg.DeleteRecords:                {{opDelete, resTopic, ""}},
	kmsg.InitProducerID:               {{opWrite, resTxnID, ""}, {opIdempotentWrite, resCluster, ""}, {opWrite, resTopic, ""}},
	kmsg.OffsetForLeaderEpoch:         {{opDescribe, resTopic, ""}, {opClusterAction, resCluster, ""}},
	kmsg.AddPartitionsToTxn:           {{opWrite, resTxnID, ""}, {opWrite, resTopic, ""}, {opClusterAction, resCluster, ""}},
	kmsg.AddOffsetsToTxn:              {{opWrite, resTxnID, ""}, {opRead, resGroup, ""}},
	kmsg.EndTxn:                       {{opWrite, resTxnID, ""}},
	kmsg.WriteTxnMarkers:              {{opClusterAction, resCluster, ""}},
	kmsg.TxnOffsetCommit:              {{opWrite, resTxnID, ""}, {opRead, resGroup, ""}, {opRead, resTopic, ""}},
	kmsg.DescribeACLs:                 {{opDescribe, resCluster, ""}},
	kmsg.CreateACLs:                   {{opAlter, resCluster, ""}},
	kmsg.DeleteACLs:                   {{opAlter, resCluster, ""}},
	kmsg.DescribeConfigs:              {{opDescribeConfigs, resCluster, ""}, {opDescribeConfigs, resTopic, ""}, {opDescribeConfigs, resGroup, ""}},
	kmsg.AlterConfigs:                 {{opAlterConfigs, resCluster, ""}, {opAlterConfigs, resTopic, ""}, {opAlterConfigs, resGroup, ""}},
	kmsg.AlterReplicaLogDirs:          {{opAlter, resCluster, ""}},
	kmsg.DescribeLogDirs:              {{opDescribe, resCluster, ""}},
	kmsg.SASLAuthenticate:             nil,
	kmsg.CreatePartitions:             {{opAlter, resTopic, ""}},
	kmsg.DeleteGroups:                 {{opDelete, resGroup, ""}},
	kmsg.ElectLeaders:                 {{opAlter, resCluster, ""}},
	kmsg.IncrementalAlterConfigs:      {{opAlterConfigs, resCluster, ""}, {opAlterConfigs, resTopic, ""}, {opAlterConfigs, resGroup, ""}},
	kmsg.AlterPartitionAssignments:    {{opAlter, resCluster, ""}},
	kmsg.ListPartitionReassignments:   {{opDescribe, resCluster, ""}},
	kmsg.OffsetDelete:                 {{opDelete, resGroup, ""}, {opRead, resTopic, ""}},
	kmsg.DescribeClientQuotas:         {{opDescribeConfigs, resCluster, ""}},
	kmsg.AlterClientQuotas:            {{opAlterConfigs, resCluster, ""}},
	kmsg.DescribeUserSCRAMCredentials: {{opDescribe, resCluster, ""}},
	kmsg.AlterUserSCRAMCredentials:    {{opAlter, resCluster, ""}},
	kmsg.DescribeQuorum:               {{opDescribe, resCluster, ""}},
	kmsg.UpdateFeatures:               {{opAlter, resCluster, ""}},
	kmsg.DescribeCluster:              {{opDescribe, resCluster, ""}},
	kmsg.DescribeProducers:            {{opRead, resTopic, ""}},
	kmsg.DescribeTransactions:         {{opDescribe, resTxnID, ""}, {opDescribe, resTopic, ""}},
	kmsg.ListTransactions:             {{opDescribe, resTxnID, ""}},
	kmsg.ConsumerGroupHeartbeat:       {{opRead, resGroup, ""}, {opDescribe, resTopic, ""}},
	kmsg.ShareGroupHeartbeat:          {{opRead, resGroup, ""}, {opDescribe, resTopic, ""}},
	kmsg.ShareGroupDescribe:           {{opDescribe, resGroup, ""}, {opDescribe, resTopic, ""}},
	kmsg.ShareFetch:                   {{opRead, resGroup, ""}, {opRead, resTopic, ""}},
	kmsg.ShareAcknowledge:             {{opRead, resGroup, ""}, {opRead, resTopic, ""}},
	kmsg.DescribeShareGroupOffsets:    {{opDescribe, resGroup, ""}, {opDescribe, resTopic, ""}},
	kmsg.AlterShareGroupOffsets:       {{opRead, resGroup, ""}, {opRead, resTopic, ""}},
	kmsg.DeleteShareGroupOffsets:      {{opDelete, resGroup, ""}, {opRead, resTopic, ""}},
	kmsg.ConsumerGroupDescribe:        {{opDescribe, resGroup, ""}},
	kmsg.DescribeTopicPartitions:      {{opDescribe, resTopic, ""}},
	kmsg.UnregisterBroker:             {{opAlter, resCluster, ""}},
	kmsg.ListConfigResources:          {{opDescribeConfigs, resCluster, ""}},
	kmsg.AddRaftVoter:                 {{opAlter, resCluster, ""}},
	kmsg.RemoveRaftVoter:              {{opAlter, resCluster, ""}},
	kmsg.CreateDelegationToken:        {{opCreateTokens, resUser, ""}},
	kmsg.RenewDelegationToken:         nil,
	kmsg.ExpireDelegationToken:        nil,
	kmsg.DescribeDelegationToken:      {{opDescribe, resDelegationToken, ""}, {opDescribeTokens, resUser, ""}},

	// KIP-714: any connected client may get its subscription and push.
	kmsg.GetTelemetrySubscriptions: nil,
	kmsg.PushTelemetry:             nil,
}

// alwaysAuthorizedOps are the APIs whose responses carry KIP-430's
// authorized operations on a resource type without the request asking
// (Kafka's DescribeTopicPartitions fills them for every topic answered):
// the bitfield asks the authorizer about every operation of that type,
// which is an answer, not a check.
var alwaysAuthorizedOps = map[kmsg.Key]kmsg.ACLResourceType{
	kmsg.DescribeTopicPartitions: resTopic,
}

type opRes struct {
	op  kmsg.ACLOperation
	res kmsg.ACLResourceType
}

func (o opRes) String() string { return o.op.String() + " " + o.res.String() }

func opResSet(ns []aclNeed) []opRes {
	var out []opRes
	for _, n := range ns {
		out = append(out, opRes{n.op, n.res})
	}
	slices.SortFunc(out, func(a, b opRes) int { return int(a.op)*16 + int(a.res) - int(b.op)*16 - int(b.res) })
	return out
}

// TestAPIAuthorizationTable: every registered API declares its checks,
// and the declaration is Kafka's row for that API.
func TestAPIAuthorizationTable(t *testing.T) {
	for key := range apis {
		name := kmsg.NameForKey(key)
		kafka, ok := kafkaACLTable[kmsg.Key(key)]
		if !ok {
			t.Errorf("%s (key %d) is served but has no row in kafkaACLTable: add Kafka's documented requirement", name, key)
			continue
		}
		decl, ok := apiACLs[key]
		if !ok {
			t.Errorf("%s (key %d) is served but declares no authorization in apiACLs (authz.go): declare %v and check it in the handler", name, key, opResSet(kafka))
			continue
		}
		if got, want := opResSet(decl), opResSet(kafka); !slices.Equal(got, want) {
			t.Errorf("%s declares %v, Kafka's table says %v", name, got, want)
		}
	}
}

// recorder is an authorizer that records every check and answers allow.
type recorder struct {
	allow bool
	mu    sync.Mutex // guards seen
	seen  map[opRes]bool
}

func (r *recorder) Authorize(_, _ string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, _ string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[opRes{op, rt}] = true
	return r.allow
}

func (r *recorder) take() map[opRes]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seen
	r.seen = map[opRes]bool{}
	return s
}

// authzSamples are requests that exercise each API's checks (topic "t"
// exists, group "g"); expectErr is false for APIs that filter instead
// of failing.
func authzSamples() map[int16]struct {
	req       kmsg.Request
	expectErr bool
} {
	type sample = struct {
		req       kmsg.Request
		expectErr bool
	}
	tx := "tx"
	t := "t"
	out := map[int16]sample{}
	add := func(req kmsg.Request, version int16, expectErr bool) {
		req.SetVersion(version)
		out[req.Key()] = sample{req, expectErr}
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks, produce.TimeoutMillis, produce.TransactionID = -1, 1000, &tx
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0}}}}
	add(produce, 7, true)
	add(fetchReq(11, "t", [16]byte{}, 0, 0), 11, true)
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1}}}}
	add(lo, 5, true)
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &t}}
	add(md, 9, true)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	add(oc, 7, true)
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = "g"
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	add(of, 7, true)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	add(fc, 3, true)
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	add(jg, 5, true)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", "m", 1
	add(hb, 3, true)
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.Group, lg.MemberID = "g", "m"
	add(lg, 2, true)
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group, sg.MemberID, sg.Generation = "g", "m", 1
	add(sg, 3, true)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g"}
	add(dg, 4, true)
	add(kmsg.NewPtrListGroupsRequest(), 3, false)
	addConsumerGroupSamples(add)
	addShareSamples(add)
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "new", NumPartitions: 1, ReplicationFactor: 1}}
	add(ct, 5, true)
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"gone"}
	add(dt, 4, true)
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "t", Count: 1}}
	add(cp, 2, true)
	add(kmsg.NewPtrInitProducerIDRequest(), 2, true)
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}, {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"}, {ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: "g"}}
	add(dc, 3, true)
	dcl := kmsg.NewPtrDescribeClusterRequest()
	add(dcl, 0, true)
	da := kmsg.NewPtrDescribeACLsRequest()
	da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	add(da, 2, true)
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: resTopic, ResourceName: "t", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:x", Host: "*", Operation: opRead, PermissionType: kmsg.ACLPermissionTypeAllow}}
	add(ca, 2, true)
	dl := kmsg.NewPtrDeleteACLsRequest()
	dl.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
	add(dl, 2, true)
	add(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), 0, true)
	au := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	au.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "nobody", Mechanism: 1}}
	add(au, 0, true)
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	add(od, 0, true)
	apt := kmsg.NewPtrAddPartitionsToTxnRequest()
	apt.TransactionalID, apt.ProducerID, apt.ProducerEpoch = "tx", 1, 0
	apt.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	add(apt, 3, true)
	aot := kmsg.NewPtrAddOffsetsToTxnRequest()
	aot.TransactionalID, aot.ProducerID, aot.Group = "tx", 1, "g"
	add(aot, 3, true)
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID = "tx", 1
	add(et, 3, true)
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID = "tx", "g", 1
	toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	add(toc, 3, true)
	wtm := kmsg.NewPtrWriteTxnMarkersRequest()
	wtm.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1, Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "nope", Partitions: []int32{0}}}}}
	add(wtm, 1, true)
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	add(dp, 0, true)
	dtx := kmsg.NewPtrDescribeTransactionsRequest()
	dtx.TransactionalIDs = []string{"tx"}
	add(dtx, 0, true)
	add(kmsg.NewPtrListTransactionsRequest(), 1, false)
	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.ValidateOnly = true
	ac.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}, {ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: "g"}}
	add(ac, 1, true)
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.ValidateOnly = true
	iac.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}, {ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: "g"}}
	add(iac, 1, true)
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "t", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}}}
	add(dr, 1, true)
	add(kmsg.NewPtrDescribeLogDirsRequest(), 3, true)
	ofl := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ofl.ReplicaID = -1
	ofl.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, LeaderEpoch: 0, CurrentLeaderEpoch: -1}}}}
	add(ofl, 3, true)
	el := kmsg.NewPtrElectLeadersRequest()
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	add(el, 2, true)
	apa := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	add(apa, 0, true)
	add(kmsg.NewPtrListPartitionReassignmentsRequest(), 0, true)
	add(kmsg.NewPtrDescribeClientQuotasRequest(), 1, true)
	acq := kmsg.NewPtrAlterClientQuotasRequest()
	acq.Entries = []kmsg.AlterClientQuotasRequestEntry{{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user"}}}}
	add(acq, 1, true)
	arl := kmsg.NewPtrAlterReplicaLogDirsRequest()
	arl.Dirs = []kmsg.AlterReplicaLogDirsRequestDir{{Dir: "/elsewhere", Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "t", Partitions: []int32{0}}}}}
	add(arl, 2, true)
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	add(dq, 2, true)
	add(kmsg.NewPtrAddRaftVoterRequest(), 0, true)
	add(kmsg.NewPtrRemoveRaftVoterRequest(), 0, true)
	add(kmsg.NewPtrUnregisterBrokerRequest(), 0, true)
	add(kmsg.NewPtrListConfigResourcesRequest(), 1, true)
	uf := kmsg.NewPtrUpdateFeaturesRequest()
	uf.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1}}
	add(uf, 2, true)
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "t"}}
	add(dtp, 0, true)
	// On a PLAINTEXT listener the token APIs are refused before any
	// ACL (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED); api_delegationtoken's
	// tests check their ACLs over SASL.
	add(kmsg.NewPtrCreateDelegationTokenRequest(), 3, false)
	add(kmsg.NewPtrDescribeDelegationTokenRequest(), 3, false)
	dgs := kmsg.NewPtrDeleteGroupsRequest()
	dgs.Groups = []string{"g"}
	add(dgs, 1, true)
	return out
}

// authzCodes are the *_AUTHORIZATION_FAILED codes.
var authzCodes = []int16{kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code}

// hasAuthzError reports whether any ErrorCode field in v is one of authzCodes.
func hasAuthzError(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer:
		return !v.IsNil() && hasAuthzError(v.Elem())
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if (f.Name == "ErrorCode" || f.Name == "ConfigErrorCode") && slices.Contains(authzCodes, int16(v.Field(i).Int())) {
				return true
			}
			if hasAuthzError(v.Field(i)) {
				return true
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if hasAuthzError(v.Index(i)) {
				return true
			}
		}
	}
	return false
}

// TestAPIAuthorizationEnforced sends every served API a request as a
// principal (1) that may do everything: the checks its handler makes
// must be among those it declares, and every unconditional one must be
// made; (2) that may do nothing: the answer must carry an
// *_AUTHORIZATION_FAILED code (unless the API filters).
func TestAPIAuthorizationEnforced(t *testing.T) {
	b, err := New(DataDir(t.TempDir()), ListenAddr("127.0.0.1:0"), Authorization(true))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec := &recorder{seen: map[opRes]bool{}}
	b.authz = rec // before Start: no goroutine reads it yet
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	samples := authzSamples()
	for key := range apis {
		name := kmsg.NameForKey(key)
		decl := apiACLs[key]
		s, ok := samples[key]
		if !ok {
			if len(decl) > 0 {
				t.Errorf("%s has no sample request in authzSamples: add one that reaches its checks", name)
			}
			continue
		}
		t.Run(name, func(t *testing.T) {
			for _, allow := range []bool{true, false} {
				rec.mu.Lock()
				rec.allow = allow
				rec.mu.Unlock()
				rec.take()
				resp := dialRaw(t, b.Addr()).roundTrip(s.req)
				seen := rec.take()
				if allow {
					for or := range seen {
						if rt, ok := alwaysAuthorizedOps[kmsg.Key(key)]; ok && or.res == rt && slices.Contains(supportedOps[rt], or.op) && or.op != kmsg.ACLOperationAny {
							continue // KIP-430's bitfield, answered unasked
						}
						if !slices.ContainsFunc(decl, func(n aclNeed) bool { return n.op == or.op && n.res == or.res }) {
							t.Errorf("%s checks %v, which it does not declare", name, or)
						}
					}
					for _, n := range decl {
						if n.when == "" && !seen[opRes{n.op, n.res}] {
							t.Errorf("%s declares %v unconditionally but did not check it", name, opRes{n.op, n.res})
						}
					}
				} else if s.expectErr && !hasAuthzError(reflect.ValueOf(resp)) {
					t.Errorf("%s with every check denied: no *_AUTHORIZATION_FAILED in %s", name, fmt.Sprintf("%+v", resp))
				}
			}
		})
	}
}

// TestACLsWithoutAuthorizer: without --authorization the ACL APIs answer
// SECURITY_DISABLED, as Kafka's do without an authorizer, and store
// nothing.
func TestACLsWithoutAuthorizer(t *testing.T) {
	tb := startTest(t)
	c := dialRaw(t, tb.addr)
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: resTopic, ResourceName: "t", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:x", Host: "*", Operation: opRead, PermissionType: kmsg.ACLPermissionTypeAllow}}
	cr := c.roundTrip(ca).(*kmsg.CreateACLsResponse)
	if len(cr.Results) != 1 || cr.Results[0].ErrorCode != kerr.SecurityDisabled.Code || cr.Results[0].ErrorMessage == nil {
		t.Fatalf("CreateAcls without an authorizer: %+v", cr.Results)
	}
	da := kmsg.NewPtrDescribeACLsRequest()
	da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr := c.roundTrip(da).(*kmsg.DescribeACLsResponse)
	if dr.ErrorCode != kerr.SecurityDisabled.Code || len(dr.Resources) != 0 {
		t.Fatalf("DescribeAcls without an authorizer: code %d, %d resources", dr.ErrorCode, len(dr.Resources))
	}
	dl := kmsg.NewPtrDeleteACLsRequest()
	dl.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
	del := c.roundTrip(dl).(*kmsg.DeleteACLsResponse)
	if len(del.Results) != 1 || del.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("DeleteAcls without an authorizer: %+v", del.Results)
	}
	if n := len(tb.b.acls.Describe(auth.Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny})); n != 0 {
		t.Fatalf("%d ACLs stored without an authorizer", n)
	}
}
