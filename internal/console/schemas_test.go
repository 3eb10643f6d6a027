package console

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	orderV1 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int"}]}`
	orderV2 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int"},{"name":"note","type":"string","default":""}]}`
)

// registerSchema registers an Avro schema through the console's
// /api/v1/registry/ and returns its id.
func (e *env) registerSchema(t *testing.T, subject, schema string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"schema": schema})
	status, resp := e.do(t, "POST", "/api/v1/registry/subjects/"+subject+"/versions", "application/vnd.schemaregistry.v1+json", string(body))
	if status != 200 {
		t.Fatalf("register %s: %d %s", subject, status, resp)
	}
	var r struct{ ID int }
	if err := json.Unmarshal([]byte(resp), &r); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// produceAvro writes n Avro records {"id":"o-<i>","qty":<i>} with
// schema id in Confluent's wire format to partition 0 of topic.
func (e *env) produceAvro(t *testing.T, topic string, id, n int, schema string) {
	t.Helper()
	sch := avro.MustParse(schema)
	cl := e.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		data, err := avro.Marshal(sch, map[string]any{"id": fmt.Sprintf("o-%d", i), "qty": i})
		if err != nil {
			t.Fatal(err)
		}
		v := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), data...)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: v})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestRecordsDecoded: with a schema registry, the records API decodes
// values in its wire format with their schema, leaves others alone, and
// the registry's REST API answers under /api/v1/registry/.
func TestRecordsDecoded(t *testing.T) {
	e := newEnv(t, envOpt{schemas: true})
	e.createTopic(t, "orders", 1)
	id := e.registerSchema(t, "orders-value", orderV1)
	e.produceAvro(t, "orders", id, 3, orderV1)
	e.produce(t, "orders", 0, 1) // plain JSON, not in the wire format
	var page recordsPage
	e.getJSON(t, "/api/v1/topics/orders/partitions/0/records?offset=0", &page)
	if len(page.Records) != 4 {
		t.Fatalf("%d records", len(page.Records))
	}
	for i, r := range page.Records[:3] {
		d := r.ValueDecoded
		if d == nil || d.SchemaID != id || d.SchemaType != "AVRO" || string(d.JSON) != fmt.Sprintf(`{"id":"o-%d","qty":%d}`, i, i) {
			t.Errorf("record %d decoded as %+v", i, d)
		}
		if r.KeyDecoded != nil {
			t.Errorf("record %d: a plain key decoded: %+v", i, r.KeyDecoded)
		}
	}
	if page.Records[3].ValueDecoded != nil {
		t.Errorf("a plain JSON value decoded: %+v", page.Records[3].ValueDecoded)
	}
	if status, body := e.get(t, "/api/v1/registry/subjects"); status != 200 || strings.TrimSpace(body) != `["orders-value"]` {
		t.Errorf("GET /api/v1/registry/subjects: %d %s", status, body)
	}
	var ci clusterInfo
	e.getJSON(t, "/api/v1/cluster", &ci)
	if !strings.Contains(strings.Join(ci.Features, ","), "schemas") {
		t.Errorf("features %v lack schemas", ci.Features)
	}
}
