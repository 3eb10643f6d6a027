package broker

// Authorization: what each API needs, and the checks handlers call.
//
// apiACLs declares, for every API the broker serves, the ACL operations
// and resource types its handler checks, following Kafka's documented
// table ("Operations and Resources on Protocols"). A handler checks them
// with request.allowed; TestAPIAuthorization (authz_test.go) fails for
// any registered API without a declaration here, for a declaration that
// differs from Kafka's table, and for a handler that checks anything it
// does not declare or skips an unconditional need. With authorization
// on, a request for an API without a declaration closes the connection
// (conn.admit), so a new API is never served unchecked.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclNeed is one check an API makes.
type aclNeed struct {
	op   kmsg.ACLOperation
	res  kmsg.ACLResourceType
	when string // "" when always checked; else the condition, for readers
}

// Short names for the table.
const (
	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite

	resTopic   = kmsg.ACLResourceTypeTopic
	resGroup   = kmsg.ACLResourceTypeGroup
	resCluster = kmsg.ACLResourceTypeCluster
	resTxnID   = kmsg.ACLResourceTypeTransactionalId
)

// apiACLs is the declaration for every served API (nil: no check, for
// the APIs a client uses before it has a principal).
var apiACLs = map[int16][]aclNeed{
	kmsg.ApiVersions.Int16():      nil,
	kmsg.SASLHandshake.Int16():    nil,
	kmsg.SASLAuthenticate.Int16(): nil,
	// KIP-714: any connected client may get its subscription and push.
	kmsg.GetTelemetrySubscriptions.Int16(): nil,
	kmsg.PushTelemetry.Int16():             nil,

	kmsg.Produce.Int16(): {{opWrite, resTopic, ""}, {opWrite, resTxnID, "transactional"}},
	kmsg.Fetch.Int16():   {{opRead, resTopic, ""}, {opClusterAction, resCluster, "follower fetch"}},
	kmsg.ListOffsets.Int16(): {
		{opDescribe, resTopic, ""}},
	kmsg.Metadata.Int16(): {{opDescribe, resTopic, ""}, {opCreate, resCluster, "auto-create"}, {opCreate, resTopic, "auto-create"}},

	kmsg.OffsetCommit.Int16():    {{opRead, resGroup, ""}, {opRead, resTopic, ""}},
	kmsg.OffsetFetch.Int16():     {{opDescribe, resGroup, ""}, {opDescribe, resTopic, ""}},
	kmsg.FindCoordinator.Int16(): {{opDescribe, resGroup, "group key"}, {opDescribe, resTxnID, "transaction key"}},
	kmsg.JoinGroup.Int16():       {{opRead, resGroup, ""}},
	kmsg.Heartbeat.Int16():       {{opRead, resGroup, ""}},
	kmsg.LeaveGroup.Int16():      {{opRead, resGroup, ""}},
	kmsg.SyncGroup.Int16():       {{opRead, resGroup, ""}},
	kmsg.DescribeGroups.Int16():  {{opDescribe, resGroup, ""}},
	kmsg.ListGroups.Int16():      {{opDescribe, resCluster, ""}, {opDescribe, resGroup, "without cluster DESCRIBE"}},
	kmsg.DeleteGroups.Int16():    {{opDelete, resGroup, ""}},
	kmsg.OffsetDelete.Int16():    {{opDelete, resGroup, ""}, {opRead, resTopic, ""}},

	kmsg.CreateTopics.Int16():     {{opCreate, resCluster, ""}, {opCreate, resTopic, "without cluster CREATE"}, {opDescribeConfigs, resTopic, "v5+ configs in the response"}},
	kmsg.DeleteTopics.Int16():     {{opDelete, resTopic, ""}, {opDescribe, resTopic, "topic ids"}},
	kmsg.CreatePartitions.Int16(): {{opAlter, resTopic, ""}},
	kmsg.InitProducerID.Int16():   {{opWrite, resTxnID, "transactional"}, {opIdempotentWrite, resCluster, "idempotent"}, {opWrite, resTopic, "idempotent, without cluster IDEMPOTENT_WRITE"}},
	kmsg.DescribeConfigs.Int16():  {{opDescribeConfigs, resCluster, "broker resources"}, {opDescribeConfigs, resTopic, "topic resources"}, {opDescribeConfigs, resGroup, "group resources"}},
	kmsg.DescribeCluster.Int16():  {{opDescribe, resCluster, ""}},

	kmsg.AddPartitionsToTxn.Int16():   {{opWrite, resTxnID, ""}, {opWrite, resTopic, ""}, {opClusterAction, resCluster, "v4+, a broker verifying"}},
	kmsg.AddOffsetsToTxn.Int16():      {{opWrite, resTxnID, ""}, {opRead, resGroup, "transactional id allowed"}},
	kmsg.EndTxn.Int16():               {{opWrite, resTxnID, ""}},
	kmsg.TxnOffsetCommit.Int16():      {{opWrite, resTxnID, ""}, {opRead, resGroup, "transactional id allowed"}, {opRead, resTopic, "group allowed"}},
	kmsg.WriteTxnMarkers.Int16():      {{opClusterAction, resCluster, ""}},
	kmsg.DescribeProducers.Int16():    {{opRead, resTopic, ""}},
	kmsg.DescribeTransactions.Int16(): {{opDescribe, resTxnID, ""}, {opDescribe, resTopic, "the transaction's partitions"}},
	kmsg.ListTransactions.Int16():     {{opDescribe, resTxnID, "each transaction listed"}},

	kmsg.AlterConfigs.Int16():               {{opAlterConfigs, resTopic, "topic resources"}, {opAlterConfigs, resCluster, "broker resources"}, {opAlterConfigs, resGroup, "group resources"}},
	kmsg.IncrementalAlterConfigs.Int16():    {{opAlterConfigs, resTopic, "topic resources"}, {opAlterConfigs, resCluster, "broker resources"}, {opAlterConfigs, resGroup, "group resources"}},
	kmsg.DeleteRecords.Int16():              {{opDelete, resTopic, ""}},
	kmsg.DescribeLogDirs.Int16():            {{opDescribe, resCluster, ""}},
	kmsg.OffsetForLeaderEpoch.Int16():       {{opDescribe, resTopic, "client"}, {opClusterAction, resCluster, "replica"}},
	kmsg.ElectLeaders.Int16():               {{opAlter, resCluster, ""}},
	kmsg.AlterPartitionAssignments.Int16():  {{opAlter, resCluster, ""}},
	kmsg.ListPartitionReassignments.Int16(): {{opDescribe, resCluster, ""}},
	kmsg.DescribeClientQuotas.Int16():       {{opDescribeConfigs, resCluster, ""}},
	kmsg.AlterClientQuotas.Int16():          {{opAlterConfigs, resCluster, ""}},

	kmsg.DescribeACLs.Int16():                 {{opDescribe, resCluster, ""}},
	kmsg.CreateACLs.Int16():                   {{opAlter, resCluster, ""}},
	kmsg.DeleteACLs.Int16():                   {{opAlter, resCluster, ""}},
	kmsg.DescribeUserSCRAMCredentials.Int16(): {{opDescribe, resCluster, ""}},
	kmsg.AlterUserSCRAMCredentials.Int16():    {{opAlter, resCluster, ""}},

	kmsg.AlterReplicaLogDirs.Int16():     {{opAlter, resCluster, ""}},
	kmsg.DescribeQuorum.Int16():          {{opDescribe, resCluster, ""}},
	kmsg.AddRaftVoter.Int16():            {{opAlter, resCluster, ""}},
	kmsg.RemoveRaftVoter.Int16():         {{opAlter, resCluster, ""}},
	kmsg.UnregisterBroker.Int16():        {{opAlter, resCluster, ""}},
	kmsg.UpdateFeatures.Int16():          {{opAlter, resCluster, ""}},
	kmsg.DescribeTopicPartitions.Int16(): {{opDescribe, resTopic, ""}},
	kmsg.ListConfigResources.Int16():     {{opDescribeConfigs, resCluster, ""}},

	kmsg.CreateDelegationToken.Int16():   {{opCreateTokens, resUser, "for an owner other than the requester"}},
	kmsg.RenewDelegationToken.Int16():    nil, // owner or renewer, not an ACL
	kmsg.ExpireDelegationToken.Int16():   nil, // owner or renewer, not an ACL
	kmsg.DescribeDelegationToken.Int16(): {{opDescribe, resDelegationToken, "tokens the principal neither owns nor renews"}, {opDescribeTokens, resUser, "tokens the principal neither owns nor renews"}},
}

// authorizer decides one check (auth.Authorizer; a recorder in tests).
type authorizer interface {
	Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool
}

// allowed reports whether the request's principal may perform op on the
// resource; always true with authorization off and on the broker's
// internal connections (InternalConn).
func (r *request) allowed(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if r.b.authz == nil || r.internal {
		return true
	}
	return r.b.authz.Authorize(r.principal, r.host, op, rt, name)
}

// allowedCluster is allowed on the cluster resource.
func (r *request) allowedCluster(op kmsg.ACLOperation) bool {
	return r.allowed(op, resCluster, clusterResource)
}

// clusterResource is the name of the cluster resource, as in Kafka.
const clusterResource = "kafka-cluster"

// supportedOps are the operations each resource type has, as Kafka
// lists them for KIP-430's authorized-operations fields.
var supportedOps = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	resTopic:   {opRead, opWrite, opCreate, opDescribe, opDelete, opAlter, opDescribeConfigs, opAlterConfigs},
	resGroup:   {opRead, opDescribe, opDelete, opDescribeConfigs, opAlterConfigs},
	resCluster: {opCreate, opClusterAction, opDescribeConfigs, opAlterConfigs, opIdempotentWrite, opAlter, opDescribe},
	resTxnID:   {opDescribe, opWrite},
}

// authorizedOps is KIP-430's bitfield of the operations on a resource
// the principal may perform: bit n set for the ACL operation of value n.
// It answers what a client asked to know and is not itself a check, so
// it is not declared in apiACLs.
func (r *request) authorizedOps(rt kmsg.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOps[rt] {
		if r.b.authz == nil || r.internal || r.b.authz.Authorize(r.principal, r.host, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// mayWriteAnyTopic reports whether the principal may write to some
// existing topic (KIP-679's alternative to IDEMPOTENT_WRITE).
func (r *request) mayWriteAnyTopic() bool {
	for _, t := range r.b.sortedTopics() {
		if r.allowed(opWrite, resTopic, t.name) {
			return true
		}
	}
	return false
}
