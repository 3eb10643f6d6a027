package broker

// AlterClientQuotas v0-1.
//
// Behaviour: Sluice enforces no client quotas. An entry that only
// removes quotas succeeds (there is nothing to remove); an entry that
// sets one gets INVALID_REQUEST with a message saying quotas are not
// enforced, rather than pretending to store a limit nothing applies.
// Unknown entity types also get INVALID_REQUEST.
//   - Authorization: ALTER_CONFIGS on the cluster (else
//     CLUSTER_AUTHORIZATION_FAILED on each entry).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AlterClientQuotas.Int16(), 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		se := kmsg.NewAlterClientQuotasResponseEntry()
		for _, en := range e.Entity {
			se.Entity = append(se.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: en.Type, Name: en.Name})
		}
		if !r.allowedCluster(opAlterConfigs) {
			se.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			resp.Entries = append(resp.Entries, se)
			continue
		}
		var msg string
		for _, en := range e.Entity {
			if !quotaEntityTypes[en.Type] {
				msg = "unknown quota entity type " + en.Type + "; Kafka's are user, client-id and ip"
			}
		}
		if msg == "" {
			for _, op := range e.Ops {
				if !op.Remove {
					msg = "Sluice does not enforce client quotas (one node, no throttling); " + op.Key + " was not set"
					break
				}
			}
		}
		if msg != "" {
			se.ErrorCode = kerr.InvalidRequest.Code
			se.ErrorMessage = &msg
		}
		resp.Entries = append(resp.Entries, se)
	}
	return resp, nil
}
