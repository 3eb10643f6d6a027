package broker

// DescribeConfigs v0-4.
//
// Behaviour:
//   - Topic resources (type 2): every config Sluice applies, with its
//     value in effect, source DYNAMIC_TOPIC_CONFIG when set at creation
//     and DEFAULT_CONFIG otherwise (IsDefault for v0), and the configs
//     accepted without effect that were set. ConfigNames filters; an
//     unknown name is left out. An unknown topic gets
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - Broker resources (type 4, name "" or "0"): the broker defaults
//     that topics inherit, read-only, source STATIC_BROKER_CONFIG.
//   - Other resource types get INVALID_REQUEST. Synonyms are not listed;
//     documentation (v3+) is null; config types (v3+) are given.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeConfigs.Int16(), 0, 4, handleDescribeConfigs) }

// configTypes gives each config's type for v3+ (kmsg.ConfigType values).
var configTypes = map[string]kmsg.ConfigType{
	"cleanup.policy":    kmsg.ConfigTypeList,
	"retention.ms":      kmsg.ConfigTypeLong,
	"retention.bytes":   kmsg.ConfigTypeLong,
	"segment.bytes":     kmsg.ConfigTypeInt,
	"segment.ms":        kmsg.ConfigTypeLong,
	"max.message.bytes": kmsg.ConfigTypeInt,
}

// brokerConfigNames maps topic configs to the broker configs that hold
// their defaults.
var brokerConfigNames = map[string]string{
	"cleanup.policy":    "log.cleanup.policy",
	"retention.ms":      "log.retention.ms",
	"retention.bytes":   "log.retention.bytes",
	"segment.bytes":     "log.segment.bytes",
	"segment.ms":        "log.roll.ms",
	"max.message.bytes": "message.max.bytes",
}

func handleDescribeConfigs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		wanted := func(name string) bool { return rr.ConfigNames == nil || slices.Contains(rr.ConfigNames, name) }
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := r.b.lookup(rr.ResourceName)
			if !r.allowed(opDescribeConfigs, resTopic, rr.ResourceName) {
				sr.ErrorCode = kerr.TopicAuthorizationFailed.Code
				break
			}
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				msg := "topic " + rr.ResourceName + " does not exist"
				sr.ErrorMessage = &msg
				break
			}
			for _, name := range t.conf.names() {
				if !wanted(name) {
					continue
				}
				v, explicit, _ := t.conf.value(name)
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value = name, &v
				c.IsDefault = !explicit
				c.Source = kmsg.ConfigSourceDefaultConfig
				if explicit {
					c.Source = kmsg.ConfigSourceDynamicTopicConfig
				}
				if ct, ok := configTypes[name]; ok {
					c.ConfigType = ct
				} else {
					c.ConfigType = kmsg.ConfigTypeString
				}
				sr.Configs = append(sr.Configs, c)
			}
		case kmsg.ConfigResourceTypeBroker:
			if !r.allowedCluster(opDescribeConfigs) {
				sr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				break
			}
			if rr.ResourceName != "" && rr.ResourceName != "0" {
				sr.ErrorCode = kerr.InvalidRequest.Code
				msg := "this broker's id is 0"
				sr.ErrorMessage = &msg
				break
			}
			for _, topicName := range slices.Sorted(mapKeys(brokerConfigNames)) {
				name := brokerConfigNames[topicName]
				if !wanted(name) {
					continue
				}
				v := topicConfigs[topicName].def
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value, c.ReadOnly = name, &v, true
				c.Source = kmsg.ConfigSourceStaticBrokerConfig
				c.ConfigType = configTypes[topicName]
				sr.Configs = append(sr.Configs, c)
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			msg := "only topic and broker configs can be described"
			sr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}
