package broker

// UpdateFeatures v0-2.
//
// Behaviour:
//   - The one finalized feature, transaction.version, is fixed at the
//     level ApiVersions advertises (2): an update to that level succeeds
//     and changes nothing; any other level gets INVALID_UPDATE_VERSION,
//     as Kafka answers a level outside what every broker supports (Sluice
//     supports only its one level at run time). An unknown feature gets
//     INVALID_UPDATE_VERSION too.
//   - A feature named twice gets INVALID_REQUEST for the whole request.
//   - v1+ UpgradeType: 1 (upgrade), 2 (safe downgrade), 3 (unsafe
//     downgrade); another value gets INVALID_REQUEST. ValidateOnly
//     checks the same way.
//   - v0-1 answer per feature; v2 has no per-feature results, so the
//     first failure is the response's error (as Kafka's v2).
//   - Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.UpdateFeatures.Int16(), 0, 2, handleUpdateFeatures) }

func handleUpdateFeatures(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	fail := func(code *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code.Code, strPtr(msg)
		return resp, nil
	}
	if !r.allowedCluster(opAlter) {
		return fail(kerr.ClusterAuthorizationFailed, "UpdateFeatures needs ALTER on the cluster")
	}
	seen := map[string]bool{}
	for _, u := range req.FeatureUpdates {
		if seen[u.Feature] {
			return fail(kerr.InvalidRequest, fmt.Sprintf("feature %s is named more than once", u.Feature))
		}
		seen[u.Feature] = true
	}
	for _, u := range req.FeatureUpdates {
		code, msg := checkFeatureUpdate(req.Version, u)
		if req.Version >= 2 {
			if code != nil {
				return fail(code, msg)
			}
			continue
		}
		res := kmsg.NewUpdateFeaturesResponseResult()
		res.Feature = u.Feature
		if code != nil {
			res.ErrorCode, res.ErrorMessage = code.Code, strPtr(msg)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// checkFeatureUpdate judges one update; nil is success (a no-op).
func checkFeatureUpdate(version int16, u kmsg.UpdateFeaturesRequestFeatureUpdate) (*kerr.Error, string) {
	if version >= 1 && (u.UpgradeType < 1 || u.UpgradeType > 3) {
		return kerr.InvalidRequest, fmt.Sprintf("upgrade type %d; 1 (upgrade), 2 (safe downgrade) and 3 (unsafe downgrade) exist", u.UpgradeType)
	}
	if u.Feature != "transaction.version" {
		return kerr.InvalidUpdateVersion, fmt.Sprintf("feature %s is not supported by this broker", u.Feature)
	}
	if u.MaxVersionLevel != transactionVersion {
		return kerr.InvalidUpdateVersion, fmt.Sprintf("transaction.version level %d: this broker supports only level %d, which is finalized", u.MaxVersionLevel, transactionVersion)
	}
	return nil, ""
}
