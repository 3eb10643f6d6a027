package broker

// AlterConfigs v0-2.
//
// Behaviour:
//   - Replaces the whole set of dynamic configs of a resource with the
//     ones in the request (Kafka's non-incremental semantics): a config
//     left out returns to its default. A null value is left out.
//   - Topic resources (2): the topic configs Sluice applies (see
//     DescribeConfigs) plus the accepted no-effect ones; each is checked,
//     the set is written to the topic's topic.json (fsynced) and takes
//     effect at once on every partition (segment size and age and
//     retention at the next append or retention check, max.message.bytes
//     and cleanup.policy at the next produce and cleaner pass).
//   - Broker resources (4): name "0" (this broker) or "" (the cluster
//     default); the dynamic broker configs are the topic defaults
//     (log.retention.ms, log.segment.bytes, log.cleanup.policy,
//     message.max.bytes, log.cleaner.*) and
//     log.cleaner.io.max.bytes.per.second. Read-only broker configs get
//     INVALID_REQUEST, unknown or bad values INVALID_CONFIG.
//   - Group resources (32): the group configs (groupconfig.go).
//   - Other resource types get INVALID_REQUEST. ValidateOnly checks
//     without changing anything. A resource named twice gets
//     INVALID_REQUEST.
//   - Authorization: ALTER_CONFIGS on each topic (else
//     TOPIC_AUTHORIZATION_FAILED), on the cluster for broker resources
//     (else CLUSTER_AUTHORIZATION_FAILED), on the group for group
//     resources (else GROUP_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AlterConfigs.Int16(), 0, 2, handleAlterConfigs) }

func handleAlterConfigs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	seen := map[resourceKey]int{}
	for _, rr := range req.Resources {
		seen[resourceKey{rr.ResourceType, rr.ResourceName}]++
	}
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		set := map[string]string{}
		var err error
		for _, c := range rr.Configs {
			if _, dup := set[c.Name]; dup {
				err = errCode(kerr.InvalidRequest, "config %s is given twice", c.Name)
			}
			if c.Value != nil {
				set[c.Name] = *c.Value
			}
		}
		replace := func(map[string]string, func(string) string) (map[string]string, error) { return set, nil }
		if err == nil {
			err = r.alterResource(rr.ResourceType, rr.ResourceName, seen, replace, req.ValidateOnly)
		}
		if err != nil {
			sr.ErrorCode = codeOf(err)
			msg := errMessage(err)
			sr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// resourceKey names a config resource.
type resourceKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

// configEdit turns a resource's current dynamic configs (and the values in
// effect) into the new set: a replacement (AlterConfigs) or the
// operations of IncrementalAlterConfigs applied.
type configEdit = func(cur map[string]string, effective func(string) string) (map[string]string, error)

// alterResource checks and applies one resource of an AlterConfigs or
// IncrementalAlterConfigs request; seen counts each resource's entries.
func (r *request) alterResource(rt kmsg.ConfigResourceType, name string, seen map[resourceKey]int, edit configEdit, validateOnly bool) error {
	switch {
	case seen[resourceKey{rt, name}] > 1:
		return errCode(kerr.InvalidRequest, "resource %q appears more than once in the request", name)
	case rt == kmsg.ConfigResourceTypeTopic && !r.allowed(opAlterConfigs, resTopic, name):
		return errCode(kerr.TopicAuthorizationFailed, "not authorized to alter the configs of topic %q", name)
	case rt == kmsg.ConfigResourceTypeBroker && !r.allowedCluster(opAlterConfigs):
		return errCode(kerr.ClusterAuthorizationFailed, "not authorized to alter broker configs (ALTER_CONFIGS on the cluster)")
	case rt == kmsg.ConfigResourceTypeGroupConfig && !r.allowed(opAlterConfigs, resGroup, name):
		return errCode(kerr.GroupAuthorizationFailed, "not authorized to alter the configs of group %q", name)
	case rt == kmsg.ConfigResourceTypeGroupConfig:
		return r.b.alterGroupConfigs(name, edit, validateOnly)
	case rt == kmsg.ConfigResourceTypeTopic:
		return r.b.alterTopicConfigs(name, edit, validateOnly)
	case rt == kmsg.ConfigResourceTypeBroker:
		return r.b.alterBrokerConfigs(name, edit, validateOnly)
	case rt == kmsg.ConfigResourceTypeClientMetrics && !r.allowedCluster(opAlterConfigs):
		return errCode(kerr.ClusterAuthorizationFailed, "not authorized to alter client metrics subscriptions (ALTER_CONFIGS on the cluster)")
	case rt == kmsg.ConfigResourceTypeClientMetrics:
		return r.b.telemetry.alter(name, edit, validateOnly)
	}
	return errCode(kerr.InvalidRequest, "only topic, broker, broker logger, client metrics and group configs can be altered")
}
