package broker

import (
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Topic configs that a single node accepts only when it can honour them,
// checked when a topic is created or its configs are altered (configs
// stored by older versions still load):
//
//   - compression.type: only "producer" (batches are stored as the
//     producer compressed them). Kafka recompresses on write for any other
//     value; Sluice does not, so it refuses them with INVALID_CONFIG
//     rather than show a setting it ignores.
//   - min.insync.replicas: an integer of at least 1. The in-sync replica
//     set is this broker alone, so a value above 1 makes every acks=all
//     produce to the topic fail with NOT_ENOUGH_REPLICAS, as Kafka fails
//     it when the ISR is smaller than the setting (acks 0 and 1 still
//     succeed).
func checkHonoured(configs map[string]string) error {
	if v, ok := configs["compression.type"]; ok && strings.TrimSpace(v) != "producer" {
		return errCode(kerr.InvalidConfig, "compression.type=%q: Sluice stores batches as the producer compressed them and does not recompress; only \"producer\" is accepted", v)
	}
	if v, ok := configs["min.insync.replicas"]; ok {
		if _, err := parseInt(v, "min.insync.replicas", 1, math.MaxInt32); err != nil {
			return err
		}
	}
	return nil
}

// minInsync is the topic's min.insync.replicas (1 when unset or, in a
// config stored by an older version, unreadable).
func (c *topicConfig) minInsync() int64 {
	v, ok := c.explicit["min.insync.replicas"]
	if !ok {
		return 1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// notEnoughReplicas is the error of an acks=all produce to a topic whose
// min.insync.replicas the one-broker ISR cannot meet, or nil.
func notEnoughReplicas(t *topic, acks int16) error {
	if acks != -1 || t == nil {
		return nil
	}
	if n := t.conf.minInsync(); n > 1 {
		return errCode(kerr.NotEnoughReplicas, "min.insync.replicas=%d for %s, but its in-sync replica set is this broker alone", n, t.name)
	}
	return nil
}
