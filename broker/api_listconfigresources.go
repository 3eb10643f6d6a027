package broker

// ListConfigResources v0-1 (KIP-714's ListClientMetricsResources, made
// general by KIP-1142).
//
// Behaviour:
//   - v0 lists CLIENT_METRICS resources, v1 the resources of the types
//     asked for (all the types below when none is asked): TOPIC (each
//     topic, __consumer_offsets included), BROKER and BROKER_LOGGER (this
//     broker, "0"), CLIENT_METRICS (each client telemetry subscription)
//     and GROUP (each group with configs set). Another type gets
//     INVALID_REQUEST.
//   - Needs DESCRIBE_CONFIGS on the cluster (else
//     CLUSTER_AUTHORIZATION_FAILED).

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.ListConfigResources.Int16(), 0, 1, handleListConfigResources)
}

func handleListConfigResources(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListConfigResourcesRequest)
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if !r.allowedCluster(opDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	all := []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker,
		kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics, kmsg.ConfigResourceTypeGroupConfig}
	types := []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeClientMetrics}
	if req.Version >= 1 {
		types = nil
		for _, t := range req.ResourceTypes {
			rt := kmsg.ConfigResourceType(t)
			if !slices.Contains(all, rt) {
				resp.ErrorCode = kerr.InvalidRequest.Code
				return resp, nil
			}
			types = append(types, rt)
		}
		if len(types) == 0 {
			types = all
		}
	}
	add := func(name string, rt kmsg.ConfigResourceType) {
		resp.ConfigResources = append(resp.ConfigResources, kmsg.ListConfigResourcesResponseConfigResource{Name: name, Type: int8(rt)})
	}
	for _, rt := range types {
		switch rt {
		case kmsg.ConfigResourceTypeTopic:
			for _, t := range r.b.sortedTopics() {
				add(t.name, rt)
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			add("0", rt)
		case kmsg.ConfigResourceTypeClientMetrics:
			for _, name := range r.b.telemetry.names() {
				add(name, rt)
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			for _, g := range r.b.sortedGroupConfigResources() {
				add(g, rt)
			}
		}
	}
	return resp, nil
}
