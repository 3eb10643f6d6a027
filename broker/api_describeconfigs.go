package broker

// DescribeConfigs v0-4.
//
// Behaviour:
//   - Topic resources (type 2): every config Sluice applies, with the
//     value in effect and its source as Kafka reports it:
//     DYNAMIC_TOPIC_CONFIG when set on the topic, DYNAMIC_BROKER_CONFIG
//     or DYNAMIC_DEFAULT_BROKER_CONFIG when inherited from a broker
//     config altered at run time, DEFAULT_CONFIG otherwise (IsDefault for
//     v0); plus the accepted no-effect configs that were set. An unknown
//     topic gets UNKNOWN_TOPIC_OR_PARTITION.
//   - Broker resource "0" (type 4): the dynamic broker configs (topic
//     defaults, log.cleaner.io.max.bytes.per.second) with their sources,
//     and read-only configs tools look for (inter.broker.protocol.version,
//     broker.id, log.dirs, listeners, num.partitions, ...), source
//     STATIC_BROKER_CONFIG when a flag set them, DEFAULT_CONFIG otherwise.
//     Broker resource "" (the cluster default) lists only the configs
//     altered at that level, as Kafka does.
//   - ConfigNames filters (an unknown name is left out). IncludeSynonyms
//     (v1+) lists every level a value could come from, highest
//     precedence first. IncludeDocumentation (v3+) gives a one-line
//     description. Config types (v3+) are given.
//   - Broker loggers (8): each logger's level (loglevels.go).
//   - Client metrics (16): a telemetry subscription's metrics,
//     interval.ms and match, source CLIENT_METRICS_CONFIG when set,
//     DEFAULT_CONFIG otherwise (a name with nothing set shows the
//     defaults, as in Kafka); needs DESCRIBE_CONFIGS on the cluster; an
//     empty name gets INVALID_REQUEST.
//   - Group resources (type 32): the group configs (groupconfig.go).
//   - Other resource types get INVALID_REQUEST.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeConfigs.Int16(), 0, 4, handleDescribeConfigs) }

func handleDescribeConfigs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		d := describer{req: req, wanted: rr.ConfigNames}
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
			sr.Configs = d.topic(&t.conf)
		case kmsg.ConfigResourceTypeBroker:
			if !r.allowedCluster(opDescribeConfigs) {
				sr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				break
			}
			switch rr.ResourceName {
			case "0":
				sr.Configs = d.broker(r.b)
			case "":
				sr.Configs = d.clusterDefault(r.b.dynamic())
			default:
				sr.ErrorCode = kerr.InvalidRequest.Code
				msg := "broker " + rr.ResourceName + " does not exist; this broker's id is 0"
				sr.ErrorMessage = &msg
			}
		case kmsg.ConfigResourceTypeBrokerLogger:
			r.describeLoggers(&d, &sr)
		case kmsg.ConfigResourceTypeClientMetrics:
			r.describeClientMetrics(&d, &sr)
		case kmsg.ConfigResourceTypeGroupConfig:
			if !r.allowed(opDescribeConfigs, resGroup, rr.ResourceName) {
				sr.ErrorCode = kerr.GroupAuthorizationFailed.Code
				break
			}
			sr.Configs = d.group(r.b, rr.ResourceName)
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			msg := "only topic, broker, broker logger, client metrics and group configs can be described"
			sr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// describer builds the config entries of one resource.
type describer struct {
	req    *kmsg.DescribeConfigsRequest
	wanted []string // nil: all
}

func (d *describer) want(name string) bool {
	return d.wanted == nil || slices.Contains(d.wanted, name)
}

type synonym struct {
	name, value string
	src         kmsg.ConfigSource
}

// entry builds one config entry; syns are its synonyms, highest
// precedence first, the first being where the value comes from.
func (d *describer) entry(name, value string, typ kmsg.ConfigType, readOnly bool, doc string, syns []synonym) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	v := value
	c.Name, c.Value, c.ReadOnly, c.ConfigType = name, &v, readOnly, typ
	c.Source = kmsg.ConfigSourceDefaultConfig
	if len(syns) > 0 {
		c.Source = syns[0].src
	}
	c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
	if d.req.IncludeSynonyms {
		for _, s := range syns {
			sy := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			sv := s.value
			sy.Name, sy.Value, sy.Source = s.name, &sv, s.src
			c.ConfigSynonyms = append(c.ConfigSynonyms, sy)
		}
	}
	if d.req.IncludeDocumentation && doc != "" {
		dd := doc
		c.Documentation = &dd
	}
	return c
}

// brokerSynonyms lists where a broker config's value can come from.
func brokerSynonyms(dyn *dynamicConfig, name, def string) []synonym {
	var out []synonym
	if v, ok := dyn.PerBroker[name]; ok {
		out = append(out, synonym{name, v, kmsg.ConfigSourceDynamicBrokerConfig})
	}
	if v, ok := dyn.ClusterDefault[name]; ok {
		out = append(out, synonym{name, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig})
	}
	return append(out, synonym{name, def, kmsg.ConfigSourceDefaultConfig})
}

func (d *describer) topic(conf *topicConfig) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range conf.names() {
		if !d.want(name) {
			continue
		}
		v, _, _ := conf.resolve(name)
		def, known := topicConfigs[name]
		var syns []synonym
		if ev, ok := conf.explicit[name]; ok {
			syns = append(syns, synonym{name, ev, kmsg.ConfigSourceDynamicTopicConfig})
		}
		typ := kmsg.ConfigTypeString
		if known {
			syns = append(syns, brokerSynonyms(conf.dyn, def.broker, def.def)...)
			typ = def.typ
			if v == "" {
				v = def.def
			}
		} else if len(syns) == 0 {
			continue
		}
		if !known && name == "min.insync.replicas" {
			typ = kmsg.ConfigTypeInt
		}
		out = append(out, d.entry(name, v, typ, false, def.doc, syns))
	}
	return out
}

func (d *describer) broker(b *Broker) []kmsg.DescribeConfigsResponseResourceConfig {
	dyn := b.dynamic()
	static := b.staticConfigs()
	names := dynamicBrokerNames()
	for n := range static {
		names = append(names, n)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range names {
		if !d.want(name) {
			continue
		}
		if def, _, ok := brokerDynamicDef(name); ok {
			syns := brokerSynonyms(dyn, name, def.def)
			out = append(out, d.entry(name, syns[0].value, def.typ, false, def.doc, syns))
			continue
		}
		s := static[name]
		src := kmsg.ConfigSourceDefaultConfig
		if s.set {
			src = kmsg.ConfigSourceStaticBrokerConfig
		}
		out = append(out, d.entry(name, s.value, s.typ, true, "", []synonym{{name, s.value, src}}))
	}
	return out
}

func (d *describer) clusterDefault(dyn *dynamicConfig) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range slices.Sorted(mapKeys(dyn.ClusterDefault)) {
		if !d.want(name) {
			continue
		}
		def, _, _ := brokerDynamicDef(name)
		v := dyn.ClusterDefault[name]
		out = append(out, d.entry(name, v, def.typ, false, def.doc, []synonym{
			{name, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig},
			{name, def.def, kmsg.ConfigSourceDefaultConfig},
		}))
	}
	return out
}

// describeClientMetrics describes the client telemetry subscription
// sr.ResourceName.
func (r *request) describeClientMetrics(d *describer, sr *kmsg.DescribeConfigsResponseResource) {
	if !r.allowedCluster(opDescribeConfigs) {
		sr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return
	}
	if sr.ResourceName == "" {
		sr.ErrorCode = kerr.InvalidRequest.Code
		msg := "a client metrics subscription needs a name"
		sr.ErrorMessage = &msg
		return
	}
	set := r.b.telemetry.configs(sr.ResourceName)
	for _, c := range []struct {
		name, def, doc string
		typ            kmsg.ConfigType
	}{
		{cmInterval, "300000", "How often, in milliseconds, matching clients push their metrics.", kmsg.ConfigTypeInt},
		{cmMatch, "", "key=regex rules a client must all match (client_instance_id, client_id, client_software_name, client_software_version, client_source_address, client_source_port); none matches every client.", kmsg.ConfigTypeList},
		{cmMetrics, "", "Prefixes of the metric names matching clients push; * for all.", kmsg.ConfigTypeList},
	} {
		if !d.want(c.name) {
			continue
		}
		syns := []synonym{{c.name, c.def, kmsg.ConfigSourceDefaultConfig}}
		if v, ok := set[c.name]; ok {
			syns = append([]synonym{{c.name, v, kmsg.ConfigSourceClientMetricsConfig}}, syns...)
		}
		sr.Configs = append(sr.Configs, d.entry(c.name, syns[0].value, c.typ, false, c.doc, syns))
	}
}
