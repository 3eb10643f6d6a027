package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKafkaPython runs kafka-python (a pure-Python client with its own
// protocol code) through integration/testdata/kafka_python_compat.py:
// KafkaAdminClient create_topics, describe_configs, alter_configs,
// create_partitions, list/describe/delete consumer groups, group offsets
// and delete_topics; a gzip KafkaProducer with acks=all and headers; a
// KafkaConsumer in a group committing its offsets; end_offsets and
// offsets_for_times.
func TestKafkaPython(t *testing.T) {
	python := needPythonModule(t, "kafka", "python3-kafka")
	n := startNode(t)
	const topic, group = "kafka-python", "kafka-python-g"
	cmd := exec.Command(python, filepath.Join("testdata", "kafka_python_compat.py"), n.addr, topic, group)
	lines := runScript(t, "kafka-python", 120*time.Second, cmd, nil)
	steps := map[string]map[string]any{}
	var order []string
	for _, l := range lines {
		s := fmt.Sprint(l["step"])
		steps[s] = l
		order = append(order, s)
	}
	want := "create_topics describe_configs produce consume list_groups describe_group group_offsets alter_configs create_partitions offsets delete_groups delete_topics"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("steps %s, want %s", got, want)
	}
	check := func(step, key string, want string) {
		t.Helper()
		if got := fmt.Sprint(steps[step][key]); got != want {
			t.Errorf("%s: %s = %s, want %s", step, key, got, want)
		}
	}
	check("create_topics", "errors", "[0]")
	check("describe_configs", "retention", "3600000")
	check("produce", "acked", "100")
	check("produce", "partitions", "[0 1 2]")

	recs, _ := steps["consume"]["records"].([]any)
	if len(recs) != 100 {
		t.Fatalf("consumed %d records, want 100", len(recs))
	}
	seen := map[string]bool{}
	next := map[float64]float64{} // partition -> next offset expected
	for _, r := range recs {
		m := r.(map[string]any)
		k, v := m["k"].(string), m["v"].(string)
		i := strings.TrimPrefix(k, "k")
		if v != "v"+i || fmt.Sprint(m["h"]) != "[[h x"+i+"]]" {
			t.Fatalf("record %v: value or header does not match its key", m)
		}
		if seen[k] {
			t.Fatalf("record %s read twice", k)
		}
		seen[k] = true
		p, o := m["p"].(float64), m["o"].(float64)
		if o != next[p] {
			t.Fatalf("partition %v: offset %v, want %v (in order, no gaps)", p, o, next[p])
		}
		next[p] = o + 1
	}

	check("list_groups", "groups", "[["+group+" consumer]]")
	check("describe_group", "error", "0")
	check("describe_group", "state", "Empty")
	check("describe_group", "protocol_type", "consumer")
	check("group_offsets", "total", "100")
	check("alter_configs", "errors", "[0]")
	check("alter_configs", "retention", "7200000")
	check("create_partitions", "errors", "[0]")
	check("create_partitions", "partitions", "4")
	check("offsets", "end_total", "100")
	check("offsets", "partition3_end", "0")
	check("offsets", "first_by_time", "0")
	check("delete_groups", "errors", "[0]")
	check("delete_topics", "errors", "[0]")
	check("delete_topics", "remaining", "[]")
}
