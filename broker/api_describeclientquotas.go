package broker

// DescribeClientQuotas v0-1.
//
// Behaviour: lists the stored quotas of every entity the filter matches
// (package quota, Set.Match): each component names an entity type (user
// or client-id) and a match type: 0 the exact name, 1 the default, 2 any
// (named or default); Strict leaves out entities with parts the filter
// does not name. A bad filter (unknown type, repeated type, match type
// past 2, ip) gets INVALID_REQUEST with the reason.
//   - Authorization: DESCRIBE_CONFIGS on the cluster (else
//     CLUSTER_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/quota"
)

func init() { register(kmsg.DescribeClientQuotas.Int16(), 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !r.allowedCluster(opDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	fs := make([]quota.Filter, 0, len(req.Components))
	for _, c := range req.Components {
		f := quota.Filter{Type: c.EntityType, Match: int8(c.MatchType)}
		if c.Match != nil {
			f.Name = *c.Match
		}
		fs = append(fs, f)
	}
	s := r.b.quotas.m.Quotas()
	es, err := s.Match(fs, req.Strict)
	if err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		return resp, nil
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	for _, e := range es {
		re := kmsg.DescribeClientQuotasResponseEntry{}
		for _, c := range e.Components() {
			re.Entity = append(re.Entity, kmsg.DescribeClientQuotasResponseEntryEntity{Type: c.Type, Name: c.Name})
		}
		vals := s.Values(e)
		for _, k := range quota.Keys {
			if v, ok := vals[k]; ok {
				re.Values = append(re.Values, kmsg.DescribeClientQuotasResponseEntryValue{Key: string(k), Value: v})
			}
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}
