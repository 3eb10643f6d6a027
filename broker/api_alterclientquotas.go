package broker

// AlterClientQuotas v0-1.
//
// Behaviour: each entry's entity (user, client-id or both, each named or
// the default: a null name) and operations are checked (package quota:
// known keys, positive values, whole byte rates), written durably to
// quotas.json and in force for the next request, without a restart. An
// entry that fails its checks gets INVALID_REQUEST with the reason and
// changes nothing; the other entries still apply. ValidateOnly checks
// without storing. ip entities (connection_creation_rate) get
// INVALID_REQUEST: Sluice does not limit connection rates.
//   - Authorization: ALTER_CONFIGS on the cluster (else
//     CLUSTER_AUTHORIZATION_FAILED on each entry).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/quota"
)

func init() { register(kmsg.AlterClientQuotas.Int16(), 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		se := kmsg.NewAlterClientQuotasResponseEntry()
		cs := make([]quota.Component, 0, len(e.Entity))
		for _, en := range e.Entity {
			se.Entity = append(se.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: en.Type, Name: en.Name})
			cs = append(cs, quota.Component{Type: en.Type, Name: en.Name})
		}
		if !r.allowedCluster(opAlterConfigs) {
			se.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			resp.Entries = append(resp.Entries, se)
			continue
		}
		err := alterQuotaEntry(r.b, cs, e.Ops, req.ValidateOnly)
		if err != nil {
			msg := err.Error()
			se.ErrorCode = kerr.InvalidRequest.Code
			if errStored(err) {
				se.ErrorCode = kerr.KafkaStorageError.Code
			}
			se.ErrorMessage = &msg
		}
		resp.Entries = append(resp.Entries, se)
	}
	return resp, nil
}

func alterQuotaEntry(b *Broker, cs []quota.Component, kops []kmsg.AlterClientQuotasRequestEntryOp, validateOnly bool) error {
	ent, err := quota.ParseEntity(cs)
	if err != nil {
		return err
	}
	ops := make([]quota.Op, 0, len(kops))
	for _, op := range kops {
		ops = append(ops, quota.Op{Key: quota.Key(op.Key), Value: op.Value, Remove: op.Remove})
	}
	return b.alterQuotas(ent, ops, validateOnly)
}
