package broker

// IncrementalAlterConfigs v0-1.
//
// Behaviour:
//   - Applies each operation to the resource's dynamic configs: SET (0)
//     sets a value, DELETE (1) removes it (back to its default), APPEND
//     (2) and SUBTRACT (3) add or remove items of a list config
//     (cleanup.policy, log.cleanup.policy) starting from the value in
//     effect. APPEND/SUBTRACT on a non-list config, an unknown operation
//     or a SET without a value get INVALID_CONFIG / INVALID_REQUEST.
//   - Resources, validation, persistence and effect as in AlterConfigs:
//     topics (2), broker "0" or "" (4) and groups (32); the whole resource fails when
//     any operation does. ValidateOnly checks without changing anything.
//   - Broker loggers (8): each logger's level, at run time (see
//     loglevels.go).
//   - Client metrics (16): a telemetry subscription's metrics,
//     interval.ms and match (see telemetry.go); metrics and match are
//     lists. Needs ALTER_CONFIGS on the cluster.
//   - Authorization: as AlterConfigs: ALTER_CONFIGS on each topic, or on
//     the cluster for broker resources.

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.IncrementalAlterConfigs.Int16(), 0, 1, handleIncrementalAlterConfigs)
}

func handleIncrementalAlterConfigs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	seen := map[resourceKey]int{}
	for _, rr := range req.Resources {
		seen[resourceKey{rr.ResourceType, rr.ResourceName}]++
	}
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		ops := rr.Configs
		edit := func(cur map[string]string, effective func(string) string) (map[string]string, error) {
			return applyIncremental(cur, effective, ops)
		}
		var err error
		if rr.ResourceType == kmsg.ConfigResourceTypeBrokerLogger && seen[resourceKey{rr.ResourceType, rr.ResourceName}] == 1 {
			err = r.alterLoggers(rr.ResourceName, ops, req.ValidateOnly)
		} else {
			err = r.alterResource(rr.ResourceType, rr.ResourceName, seen, edit, req.ValidateOnly)
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

// listConfigs are the configs APPEND and SUBTRACT apply to.
var listConfigs = map[string]bool{"cleanup.policy": true, "log.cleanup.policy": true, cmMetrics: true, cmMatch: true}

// applyIncremental applies IncrementalAlterConfigs operations to cur.
func applyIncremental(cur map[string]string, effective func(string) string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	if cur == nil {
		cur = map[string]string{}
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return nil, errCode(kerr.InvalidRequest, "config %s is given twice", op.Name)
		}
		seen[op.Name] = true
		value := ""
		if op.Value != nil {
			value = *op.Value
		}
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return nil, errCode(kerr.InvalidRequest, "SET of %s without a value", op.Name)
			}
			cur[op.Name] = value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(cur, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if !listConfigs[op.Name] {
				return nil, errCode(kerr.InvalidConfig, "%s is not a list config; APPEND and SUBTRACT apply to cleanup.policy only", op.Name)
			}
			have, ok := cur[op.Name]
			if !ok {
				have = effective(op.Name)
			}
			items := splitList(have)
			for _, it := range splitList(value) {
				i := slices.Index(items, it)
				switch {
				case op.Op == kmsg.IncrementalAlterConfigOpAppend && i < 0:
					items = append(items, it)
				case op.Op == kmsg.IncrementalAlterConfigOpSubtract && i >= 0:
					items = slices.Delete(items, i, i+1)
				}
			}
			cur[op.Name] = strings.Join(items, ",")
		default:
			return nil, errCode(kerr.InvalidRequest, "unknown config operation %d on %s", op.Op, op.Name)
		}
	}
	return cur, nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
