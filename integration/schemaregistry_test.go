package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicedb/sluice/internal/schemaregistry"
)

// startRegistry serves a schema registry for n's broker on a free port
// of 127.0.0.1 and returns its URL; it is closed when the test ends.
func startRegistry(t *testing.T, n *node) string {
	t.Helper()
	reg, err := schemaregistry.New(ctxT(t, time.Minute), schemaregistry.Config{Broker: n.b})
	if err != nil {
		t.Fatalf("schemaregistry.New: %v", err)
	}
	addr, err := reg.ListenAndServe("127.0.0.1:0")
	if err != nil {
		reg.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return "http://" + addr
}

const srUserV1 = `{"type":"record","name":"User","namespace":"ex","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`
const srUserV2 = `{"type":"record","name":"User","namespace":"ex","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"email","type":"string","default":""}]}`

// TestSchemaRegistryFranzGo drives the registry with franz-go's sr
// client: register, lookup, compatibility, references, delete.
func TestSchemaRegistryFranzGo(t *testing.T) {
	n := startNode(t)
	url := startRegistry(t, n)
	ctx := ctxT(t, time.Minute)
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	types, err := cl.SupportedTypes(ctx)
	if err != nil || len(types) != 3 {
		t.Fatalf("SupportedTypes = %v, %v", types, err)
	}
	s1, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: srUserV1})
	if err != nil {
		t.Fatalf("CreateSchema: %v", err)
	}
	if s1.ID != 1 || s1.Version != 1 || s1.Subject != "users-value" {
		t.Fatalf("CreateSchema = %+v", s1)
	}
	got, err := cl.LookupSchema(ctx, "users-value", sr.Schema{Schema: srUserV1})
	if err != nil || got.ID != 1 || got.Version != 1 {
		t.Fatalf("LookupSchema = %+v, %v", got, err)
	}
	_, err = cl.LookupSchema(ctx, "users-value", sr.Schema{Schema: srUserV2})
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != 40403 || re.StatusCode != http.StatusNotFound {
		t.Fatalf("LookupSchema of an unregistered schema: %v", err)
	}
	cc, err := cl.CheckCompatibility(ctx, "users-value", -1, sr.Schema{Schema: srUserV2})
	if err != nil || !cc.Is {
		t.Fatalf("CheckCompatibility(v2) = %+v, %v", cc, err)
	}
	bad := `{"type":"record","name":"User","namespace":"ex","fields":[{"name":"id","type":"string"}]}`
	cc, err = cl.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), "users-value", -1, sr.Schema{Schema: bad})
	if err != nil || cc.Is || len(cc.Messages) == 0 {
		t.Fatalf("CheckCompatibility(bad) = %+v, %v", cc, err)
	}
	if _, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: bad}); !errors.As(err, &re) || re.ErrorCode != 409 {
		t.Fatalf("CreateSchema(incompatible) = %v, want error code 409", err)
	}
	s2, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: srUserV2})
	if err != nil || s2.ID != 2 || s2.Version != 2 {
		t.Fatalf("CreateSchema(v2) = %+v, %v", s2, err)
	}
	if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFull}, "users-value"); r[0].Err != nil || r[0].Level != sr.CompatFull {
		t.Fatalf("SetCompatibility = %+v", r)
	}
	if r := cl.Compatibility(ctx, "users-value"); r[0].Err != nil || r[0].Level != sr.CompatFull {
		t.Fatalf("Compatibility = %+v", r)
	}

	// References: a Protobuf schema importing another subject's file.
	money := `syntax = "proto3"; package ex; message Money { int64 units = 1; string currency = 2; }`
	m, err := cl.CreateSchema(ctx, "money", sr.Schema{Schema: money, Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatalf("CreateSchema(money): %v", err)
	}
	order := `syntax = "proto3"; package ex; import "ex/money.proto"; import "google/protobuf/timestamp.proto"; message Order { ex.Money total = 1; google.protobuf.Timestamp at = 2; }`
	o, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: order, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "ex/money.proto", Subject: "money", Version: m.Version}}})
	if err != nil {
		t.Fatalf("CreateSchema(order): %v", err)
	}
	refs, err := cl.SchemaReferences(ctx, "money", 1)
	if err != nil || len(refs) != 1 || refs[0].ID != o.ID {
		t.Fatalf("SchemaReferences = %+v, %v", refs, err)
	}
	byID, err := cl.SchemaByID(ctx, o.ID)
	if err != nil || byID.Type != sr.TypeProtobuf || len(byID.References) != 1 || byID.References[0].Subject != "money" {
		t.Fatalf("SchemaByID = %+v, %v", byID, err)
	}
	if _, err := cl.DeleteSubject(ctx, "money", sr.SoftDelete); !errors.As(err, &re) || re.ErrorCode != 42206 {
		t.Fatalf("DeleteSubject(referenced) = %v, want 42206", err)
	}

	// Delete: soft, then hard.
	vs, err := cl.DeleteSubject(ctx, "users-value", sr.SoftDelete)
	if err != nil || len(vs) != 2 {
		t.Fatalf("DeleteSubject soft = %v, %v", vs, err)
	}
	subjects, err := cl.Subjects(ctx)
	if err != nil || len(subjects) != 2 {
		t.Fatalf("Subjects after a soft delete = %v, %v", subjects, err)
	}
	if _, err := cl.DeleteSubject(ctx, "users-value", sr.HardDelete); err != nil {
		t.Fatalf("DeleteSubject hard: %v", err)
	}
	if _, err := cl.SchemaByID(ctx, s1.ID); !errors.As(err, &re) || re.ErrorCode != 40403 {
		t.Fatalf("SchemaByID after a hard delete = %v, want 40403", err)
	}
	// A new schema never takes a deleted one's id.
	s3, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: srUserV1})
	if err != nil || s3.ID <= o.ID {
		t.Fatalf("CreateSchema after a hard delete = %+v, %v (ids so far up to %d)", s3, err, o.ID)
	}
}

type srUser struct {
	ID    int64  `avro:"id"`
	Name  string `avro:"name"`
	Email string `avro:"email"`
}

// TestSchemaRegistrySerde encodes records with sr.Serde under a
// registered Avro schema, produces them through Sluice, consumes them
// and decodes them with the schema fetched by the id in each record.
func TestSchemaRegistrySerde(t *testing.T) {
	n := startNode(t)
	url := startRegistry(t, n)
	ctx := ctxT(t, time.Minute)
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(ctx, "people-value", sr.Schema{Schema: srUserV2})
	if err != nil {
		t.Fatal(err)
	}
	schema := avro.MustParse(srUserV2)
	var serde sr.Serde
	serde.Register(ss.ID, srUser{},
		sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }),
		sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(schema, b, v) }))

	kcl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("people"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	want := []srUser{{1, "ada", "ada@example.com"}, {2, "grace", ""}, {3, "edsger", "e@example.com"}}
	for _, u := range want {
		b, err := serde.Encode(u)
		if err != nil {
			t.Fatal(err)
		}
		if err := kcl.ProduceSync(ctx, &kgo.Record{Value: b}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// The consumer knows nothing but the registry: it looks the schema
	// up by the id in each record.
	cons, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ConsumeTopics("people"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var dec sr.Serde
	var got []srUser
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			id, _, err := dec.DecodeID(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			if !dec.IsRegistered(id) {
				text, err := cl.SchemaByID(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				s := avro.MustParse(text.Schema)
				dec.Register(id, srUser{}, sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(s, b, v) }))
			}
			var u srUser
			if err := dec.Decode(r.Value, &u); err != nil {
				t.Fatal(err)
			}
			got = append(got, u)
		})
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestSchemaRegistryKafkajs runs @kafkajs/confluent-schema-registry
// (testdata/kafkajs/sluice_sr.js): it registers an Avro, a Protobuf and
// a JSON schema, encodes a value with each, produces the bytes through
// Sluice with kafkajs, and decodes what it consumes with the schemas
// the registry returns for the ids in the records.
func TestSchemaRegistryKafkajs(t *testing.T) {
	modules := needKafkajs(t)
	n := startNode(t)
	url := startRegistry(t, n)
	args, _ := json.Marshal(map[string]any{"brokers": []string{n.addr}, "registry": url, "topic": "kafkajs-sr"})
	cmd := exec.Command("node", filepath.Join("testdata", "kafkajs", "sluice_sr.js"), string(args))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "KAFKAJS_NO_PARTITIONER_WARNING=1")
	lines := runScript(t, "kafkajs schema registry", 90*time.Second, cmd, nil)
	var registered, decoded []map[string]any
	for _, l := range lines {
		switch l["step"] {
		case "registered":
			registered = append(registered, l)
		case "decoded":
			decoded = append(decoded, l)
		}
	}
	if len(registered) != 3 || len(decoded) != 3 {
		t.Fatalf("registered %v, decoded %v", registered, decoded)
	}
	for i, r := range registered {
		id := r["id"].(float64)
		if id != float64(i+1) || r["again"] != id || r["latest"] != id || r["magic"] != 0.0 || r["encodedId"] != id {
			t.Fatalf("registration %d: %v", i, r)
		}
	}
	for i, d := range decoded {
		want := []string{"avro", "protobuf", "json"}[i]
		if d["x"] != float64(i+1) || d["label"] != want {
			t.Fatalf("decoded %d = %v, want x=%d label=%s", i, d, i+1, want)
		}
	}
}

// TestSchemaRegistryConfluentPython runs confluent-kafka-python's
// SchemaRegistryClient (testdata/confluent_sr.py): register, fetch,
// look up, compatibility and config with Avro schemas, and a JSON
// Schema serializer round trip through Sluice.
func TestSchemaRegistryConfluentPython(t *testing.T) {
	python := needConfluentKafka(t)
	for _, m := range []string{"requests", "jsonschema"} {
		needPythonModule(t, m, "python3-"+m)
	}
	n := startNode(t)
	url := startRegistry(t, n)
	args, _ := json.Marshal(map[string]any{"bootstrap": n.addr, "registry": url, "topic": "confluent-sr"})
	cmd := exec.Command(python, filepath.Join("testdata", "confluent_sr.py"), string(args))
	cmd.Env = os.Environ()
	lines := runScript(t, "confluent-kafka schema registry", 90*time.Second, cmd, nil)
	steps := map[string]map[string]any{}
	for _, l := range lines {
		steps[l["step"].(string)] = l
	}
	avro, avro2, inc, js := steps["avro"], steps["avro2"], steps["incompatible"], steps["json"]
	if avro == nil || avro["id"] != 1.0 || avro["fetched_type"] != "AVRO" || avro["fetched_same"] != true ||
		avro["latest_version"] != 1.0 || avro["latest_id"] != 1.0 || avro["lookup_id"] != 1.0 ||
		avro["compatible_v2"] != true || avro["compatible_bad"] != false {
		t.Fatalf("avro step: %v", avro)
	}
	if avro2 == nil || avro2["id"] != 2.0 || avro2["compatibility"] != "FULL" || fmt.Sprint(avro2["versions"]) != "[1 2]" {
		t.Fatalf("avro2 step: %v", avro2)
	}
	if inc == nil || inc["registered"] != false || inc["http_status"] != 409.0 || inc["error_code"] != 409.0 {
		t.Fatalf("incompatible step: %v", inc)
	}
	if js == nil || fmt.Sprint(js["subject_versions"]) != "[1]" {
		t.Fatalf("json step: %v", js)
	}
	got := js["got"].([]any)
	sent := js["sent"].([]any)
	if len(got) != 3 {
		t.Fatalf("json step: got %v", got)
	}
	for i := range got {
		g := got[i].(map[string]any)
		if g["magic"] != 0.0 || g["id"] != 3.0 || fmt.Sprint(g["value"]) != fmt.Sprint(sent[i]) {
			t.Fatalf("json record %d = %v, sent %v", i, g, sent[i])
		}
	}
}

// TestSchemaRegistryDocCommands runs the commands of
// docs/schema-registry.md against a broker and its registry.
func TestSchemaRegistryDocCommands(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		needTool(t, "curl not found")
	}
	n := startNode(t)
	url := startRegistry(t, n)
	t.Setenv("SLUICE_SCHEMA_REGISTRY_URL", url)
	block := strings.ReplaceAll(docBlock(t, "docs/schema-registry.md", "schema-registry-doc-commands"), "http://127.0.0.1:8081", url)
	out := runDocCommands(t, n, block)
	for _, want := range []string{
		"registered orders-value version 1 id 1", "compatible", "registered orders-value version 2 id 2",
		"orders-value: compatibility FULL_TRANSITIVE, mode READWRITE", "orders-value  1,2", "# subject orders-value, version 1, id 1, type AVRO",
		"[1,2]", `[{"subject":"orders-value","version":2}]`, "deleted orders-value version 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
