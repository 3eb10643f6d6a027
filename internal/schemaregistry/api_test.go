package schemaregistry

import (
	"context"
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	avroV1 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}`
	avroV2 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"email","type":"string","default":""}]}`
	avroV3 = `{"type":"record","name":"User","fields":[{"name":"id","type":"string"}]}`
)

// TestSubjectLifecycle walks a subject through Confluent's REST API:
// register, re-register, lookup, get, list, incompatible change,
// soft and hard delete; status codes and error codes as Confluent's.
func TestSubjectLifecycle(t *testing.T) {
	e := newEnv(t)
	e.want(t, "GET", "/subjects", "", 200, `[]`)
	e.want(t, "GET", "/subjects/users-value/versions", "", 404, `{"error_code":40401,"message":"Subject 'users-value' not found."}`)
	e.want(t, "POST", "/subjects/users-value/versions", schemaBody("", avroV1), 200, `{"id":1}`)
	// The same schema, formatted differently, keeps its id and version.
	e.want(t, "POST", "/subjects/users-value/versions", schemaBody("", "{ \"type\": \"record\", \"name\": \"User\",\n \"fields\": [{\"name\": \"id\", \"type\": \"long\"}] }"), 200, `{"id":1}`)
	e.want(t, "GET", "/subjects/users-value/versions", "", 200, `[1]`)
	e.want(t, "POST", "/subjects/users-value/versions", schemaBody("AVRO", avroV2), 200, `{"id":2}`)
	e.want(t, "GET", "/subjects/users-value/versions/latest", "", 200, `{"subject":"users-value","version":2,"id":2,"schema":`+mustJSON(avroV2)+`}`)
	e.want(t, "GET", "/subjects/users-value/versions/1/schema", "", 200, avroV1)
	e.want(t, "GET", "/subjects/users-value/versions/3", "", 404, `{"error_code":40402,"message":"Version 3 not found."}`)
	if st, body := e.do(t, "GET", "/subjects/users-value/versions/abc", ""); st != 422 || !sameCode(body, 42202) {
		t.Fatalf("bad version: %d %s", st, body)
	}
	e.want(t, "POST", "/subjects/users-value", schemaBody("", avroV1), 200, `{"subject":"users-value","version":1,"id":1,"schema":`+mustJSON(avroV1)+`}`)
	e.want(t, "POST", "/subjects/users-value", schemaBody("", avroV3), 404, `{"error_code":40403,"message":"Schema not found"}`)
	if st, body := e.do(t, "POST", "/subjects/users-value/versions", schemaBody("", avroV3)); st != http.StatusConflict || !sameCode(body, 409) {
		t.Fatalf("incompatible: %d %s", st, body)
	}
	if st, body := e.do(t, "POST", "/subjects/users-value/versions", schemaBody("", `{"type":"record"`)); st != 422 || !sameCode(body, 42201) {
		t.Fatalf("invalid: %d %s", st, body)
	}
	// The same schema in another subject gets the same id.
	e.want(t, "POST", "/subjects/other/versions", schemaBody("", avroV1), 200, `{"id":1}`)
	e.want(t, "GET", "/schemas/ids/1", "", 200, `{"schema":`+mustJSON(avroV1)+`}`)
	e.want(t, "GET", "/schemas/ids/1/subjects", "", 200, `["other","users-value"]`)
	e.want(t, "GET", "/schemas/ids/1/versions", "", 200, `[{"subject":"other","version":1},{"subject":"users-value","version":1}]`)
	e.want(t, "GET", "/schemas/ids/99", "", 404, `{"error_code":40403,"message":"Schema 99 not found"}`)
	e.want(t, "GET", "/schemas/types", "", 200, `["JSON","PROTOBUF","AVRO"]`)

	// Soft delete, then hard delete.
	e.want(t, "DELETE", "/subjects/users-value/versions/2?permanent=true", "", 404,
		`{"error_code":40407,"message":"Subject 'users-value' Version 2 was not deleted first before being permanently deleted"}`)
	e.want(t, "DELETE", "/subjects/users-value/versions/2", "", 200, `2`)
	e.want(t, "DELETE", "/subjects/users-value/versions/2", "", 404,
		`{"error_code":40406,"message":"Subject 'users-value' Version 2 was soft deleted.Set permanent=true to delete permanently"}`)
	e.want(t, "GET", "/subjects/users-value/versions", "", 200, `[1]`)
	e.want(t, "GET", "/subjects/users-value/versions?deleted=true", "", 200, `[1,2]`)
	e.want(t, "DELETE", "/subjects/users-value/versions/2?permanent=true", "", 200, `2`)
	e.want(t, "GET", "/subjects/users-value/versions?deleted=true", "", 200, `[1]`)
	e.want(t, "DELETE", "/subjects/users-value?permanent=true", "", 404,
		`{"error_code":40405,"message":"Subject 'users-value' was not deleted first before being permanently deleted"}`)
	e.want(t, "DELETE", "/subjects/users-value", "", 200, `[1]`)
	e.want(t, "GET", "/subjects", "", 200, `["other"]`)
	e.want(t, "GET", "/subjects?deleted=true", "", 200, `["other","users-value"]`)
	if st, body := e.do(t, "DELETE", "/subjects/users-value", ""); st != 404 || !sameCode(body, 40404) {
		t.Fatalf("second soft delete: %d %s", st, body)
	}
	e.want(t, "DELETE", "/subjects/users-value?permanent=true", "", 200, `[1]`)
	e.want(t, "GET", "/subjects?deleted=true", "", 200, `["other"]`)
	// Ids are never reused: id 2 went with its last version, so the
	// same schema gets a new one. A version after a soft-deleted one
	// continues the numbering and keeps the schema's id.
	e.want(t, "POST", "/subjects/other/versions", schemaBody("", avroV2), 200, `{"id":3}`)
	e.want(t, "DELETE", "/subjects/other/versions/2", "", 200, `2`)
	e.want(t, "POST", "/subjects/other/versions", schemaBody("", avroV2), 200, `{"id":3}`)
	e.want(t, "GET", "/subjects/other/versions", "", 200, `[1,3]`)
	e.want(t, "GET", "/nope", "", 404, `{"error_code":404,"message":"HTTP 404 Not Found"}`)
}

func sameCode(body string, code int) bool {
	var v struct {
		Code int `json:"error_code"`
	}
	return jsonUnmarshal(body, &v) == nil && v.Code == code
}

// TestConfigAndMode covers /config and /mode at both levels.
func TestConfigAndMode(t *testing.T) {
	e := newEnv(t)
	e.want(t, "GET", "/config", "", 200, `{"compatibilityLevel":"BACKWARD"}`)
	e.want(t, "PUT", "/config", `{"compatibility":"full"}`, 200, `{"compatibility":"FULL"}`)
	e.want(t, "GET", "/config", "", 200, `{"compatibilityLevel":"FULL"}`)
	e.want(t, "PUT", "/config", `{"compatibility":"SIDEWAYS"}`, 422, `{"error_code":42203,"message":"Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive"}`)
	e.want(t, "GET", "/config/s", "", 404, `{"error_code":40408,"message":"Subject 's' does not have subject-level compatibility configured"}`)
	e.want(t, "GET", "/config/s?defaultToGlobal=true", "", 200, `{"compatibilityLevel":"FULL"}`)
	for _, l := range []string{"NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"} {
		e.want(t, "PUT", "/config/s", `{"compatibility":"`+l+`"}`, 200, `{"compatibility":"`+l+`"}`)
		e.want(t, "GET", "/config/s", "", 200, `{"compatibilityLevel":"`+l+`"}`)
	}
	e.want(t, "DELETE", "/config/s", "", 200, `{"compatibilityLevel":"FULL_TRANSITIVE"}`)
	e.want(t, "GET", "/config/s", "", 404, `{"error_code":40408,"message":"Subject 's' does not have subject-level compatibility configured"}`)
	e.want(t, "DELETE", "/config", "", 200, `{"compatibilityLevel":"FULL"}`)
	e.want(t, "GET", "/config", "", 200, `{"compatibilityLevel":"BACKWARD"}`)

	e.want(t, "GET", "/mode", "", 200, `{"mode":"READWRITE"}`)
	e.want(t, "GET", "/mode/s", "", 404, `{"error_code":40409,"message":"Subject 's' does not have subject-level mode configured"}`)
	e.want(t, "GET", "/mode/s?defaultToGlobal=true", "", 200, `{"mode":"READWRITE"}`)
	e.want(t, "PUT", "/mode/s", `{"mode":"READONLY"}`, 200, `{"mode":"READONLY"}`)
	if st, body := e.do(t, "POST", "/subjects/s/versions", schemaBody("", avroV1)); st != 422 || !sameCode(body, 42205) {
		t.Fatalf("register in READONLY: %d %s", st, body)
	}
	e.want(t, "PUT", "/mode/s", `{"mode":"FAST"}`, 422, `{"error_code":42204,"message":"Invalid mode \"FAST\". Valid values are READWRITE, READONLY and IMPORT"}`)
	e.want(t, "DELETE", "/mode/s", "", 200, `{"mode":"READONLY"}`)
	e.want(t, "POST", "/subjects/s/versions", schemaBody("", avroV1), 200, `{"id":1}`)

	// IMPORT keeps the ids and versions given; it needs force while
	// subjects exist.
	if st, body := e.do(t, "PUT", "/mode", `{"mode":"IMPORT"}`); st != 422 || !sameCode(body, 42205) {
		t.Fatalf("IMPORT with subjects: %d %s", st, body)
	}
	e.want(t, "PUT", "/mode?force=true", `{"mode":"IMPORT"}`, 200, `{"mode":"IMPORT"}`)
	e.want(t, "POST", "/subjects/imported/versions", mustJSON(map[string]any{"schema": avroV3, "id": 100, "version": 7}), 200, `{"id":100}`)
	e.want(t, "GET", "/subjects/imported/versions/7", "", 200, `{"subject":"imported","version":7,"id":100,"schema":`+mustJSON(avroV3)+`}`)
	e.want(t, "POST", "/subjects/imported2/versions", mustJSON(map[string]any{"schema": avroV2, "id": 100, "version": 1}), 422,
		`{"error_code":42207,"message":"Overwrite new schema with id 100 is not permitted."}`)
	e.want(t, "PUT", "/mode", `{"mode":"READWRITE"}`, 200, `{"mode":"READWRITE"}`)
	if st, body := e.do(t, "POST", "/subjects/x/versions", mustJSON(map[string]any{"schema": avroV1, "id": 5})); st != 422 || !sameCode(body, 42205) {
		t.Fatalf("id outside IMPORT: %d %s", st, body)
	}
	// A new schema's id is above every imported one.
	e.want(t, "POST", "/subjects/x/versions", schemaBody("", avroV2), 200, `{"id":101}`)
}

// TestCompatibilityEndpoint covers /compatibility with verbose.
func TestCompatibilityEndpoint(t *testing.T) {
	e := newEnv(t)
	e.want(t, "POST", "/subjects/s/versions", schemaBody("", avroV1), 200, `{"id":1}`)
	e.want(t, "POST", "/compatibility/subjects/s/versions/latest", schemaBody("", avroV2), 200, `{"is_compatible":true}`)
	e.want(t, "POST", "/compatibility/subjects/s/versions/1?verbose=true", schemaBody("", avroV2), 200, `{"is_compatible":true,"messages":[]}`)
	e.want(t, "POST", "/compatibility/subjects/s/versions/latest", schemaBody("", avroV3), 200, `{"is_compatible":false}`)
	st, body := e.do(t, "POST", "/compatibility/subjects/s/versions/latest?verbose=true", schemaBody("", avroV3))
	var v struct {
		OK   bool     `json:"is_compatible"`
		Msgs []string `json:"messages"`
	}
	if st != 200 || jsonUnmarshal(body, &v) != nil || v.OK || len(v.Msgs) == 0 {
		t.Fatalf("verbose incompatible: %d %s", st, body)
	}
	e.want(t, "POST", "/compatibility/subjects/none/versions/latest", schemaBody("", avroV3), 404, `{"error_code":40401,"message":"Subject 'none' not found."}`)
}

// TestReferences registers schemas that import others, in each type,
// and checks referencedby and that a referenced version cannot go.
func TestReferences(t *testing.T) {
	e := newEnv(t)
	// Avro: a named type from another subject.
	e.want(t, "POST", "/subjects/address/versions", schemaBody("", `{"type":"record","name":"Address","namespace":"ex","fields":[{"name":"city","type":"string"}]}`), 200, `{"id":1}`)
	e.want(t, "POST", "/subjects/person/versions", schemaBody("", `{"type":"record","name":"Person","namespace":"ex","fields":[{"name":"home","type":"ex.Address"}]}`,
		Reference{Name: "ex.Address", Subject: "address", Version: 1}), 200, `{"id":2}`)
	if st, body := e.do(t, "POST", "/subjects/person2/versions", schemaBody("", `{"type":"record","name":"Person","namespace":"ex","fields":[{"name":"home","type":"ex.Address"}]}`)); st != 422 || !sameCode(body, 42201) {
		t.Fatalf("unresolved Avro name: %d %s", st, body)
	}
	e.want(t, "GET", "/subjects/address/versions/1/referencedby", "", 200, `[2]`)
	if st, body := e.do(t, "DELETE", "/subjects/address/versions/1", ""); st != 422 || !sameCode(body, 42206) {
		t.Fatalf("delete referenced: %d %s", st, body)
	}
	e.want(t, "GET", "/schemas/ids/2", "", 200, `{"references":[{"name":"ex.Address","subject":"address","version":1}],"schema":`+mustJSON(`{"type":"record","name":"Person","namespace":"ex","fields":[{"name":"home","type":"ex.Address"}]}`)+`}`)

	// Protobuf: an import of another subject, and a well-known type.
	dep := `syntax = "proto3"; package ex; message Money { int64 units = 1; string currency = 2; }`
	e.want(t, "POST", "/subjects/money/versions", schemaBody("PROTOBUF", dep), 200, `{"id":3}`)
	order := `syntax = "proto3"; package ex; import "ex/money.proto"; import "google/protobuf/timestamp.proto";
message Order { ex.Money total = 1; google.protobuf.Timestamp at = 2; }`
	e.want(t, "POST", "/subjects/order/versions", schemaBody("PROTOBUF", order, Reference{Name: "ex/money.proto", Subject: "money", Version: -1}), 200, `{"id":4}`)
	e.want(t, "GET", "/subjects/order/versions/1", "", 200, `{"subject":"order","version":1,"id":4,"schemaType":"PROTOBUF","references":[{"name":"ex/money.proto","subject":"money","version":1}],"schema":`+mustJSON(order)+`}`)

	// JSON Schema: a $ref to another subject's schema.
	e.want(t, "POST", "/subjects/addr-json/versions", schemaBody("JSON", `{"type":"object","properties":{"city":{"type":"string"}}}`), 200, `{"id":5}`)
	e.want(t, "POST", "/subjects/person-json/versions", schemaBody("JSON", `{"type":"object","properties":{"home":{"$ref":"address.json"}}}`,
		Reference{Name: "address.json", Subject: "addr-json", Version: 1}), 200, `{"id":6}`)
	if st, body := e.do(t, "POST", "/subjects/person-json2/versions", schemaBody("JSON", `{"type":"object","properties":{"home":{"$ref":"file:///etc/passwd"}}}`)); st != 422 || !sameCode(body, 42201) {
		t.Fatalf("unregistered $ref: %d %s", st, body)
	}
}

// TestNormalize: with normalize=true the stored text is normalized and
// schemas that differ only in key order or comments share an id.
func TestNormalize(t *testing.T) {
	e := newEnv(t)
	e.want(t, "POST", "/subjects/s/versions?normalize=true", schemaBody("", `{"name":"R","type":"record","fields":[{"type":"int","name":"a"}]}`), 200, `{"id":1}`)
	e.want(t, "POST", "/subjects/s/versions?normalize=true", schemaBody("", `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`), 200, `{"id":1}`)
	e.want(t, "GET", "/subjects/s/versions/1/schema", "", 200, `{"fields":[{"name":"a","type":"int"}],"name":"R","type":"record"}`)
	e.want(t, "POST", "/subjects/p/versions?normalize=true", schemaBody("PROTOBUF", "syntax = \"proto3\";\n// a comment\nmessage M {\n  int32 a = 1;\n}\n"), 200, `{"id":2}`)
	e.want(t, "POST", "/subjects/p/versions?normalize=true", schemaBody("PROTOBUF", `syntax="proto3"; message M { int32 a = 1; }`), 200, `{"id":2}`)
}

// TestReplay: a registry opened again over the same topic has every
// subject, version, id, config and mode, and continues the ids.
func TestReplay(t *testing.T) {
	e := newEnv(t)
	e.want(t, "POST", "/subjects/a/versions", schemaBody("", avroV1), 200, `{"id":1}`)
	e.want(t, "POST", "/subjects/a/versions", schemaBody("", avroV2), 200, `{"id":2}`)
	e.want(t, "POST", "/subjects/b/versions", schemaBody("JSON", `{"type":"string"}`), 200, `{"id":3}`)
	e.want(t, "DELETE", "/subjects/b", "", 200, `[1]`)
	e.want(t, "DELETE", "/subjects/b?permanent=true", "", 200, `[1]`)
	e.want(t, "PUT", "/config/a", `{"compatibility":"NONE"}`, 200, `{"compatibility":"NONE"}`)
	e.want(t, "PUT", "/mode", `{"mode":"READWRITE"}`, 200, `{"mode":"READWRITE"}`)
	e.want(t, "DELETE", "/subjects/a/versions/1", "", 200, `1`)
	e.close()

	e2 := openEnv(t, e.b)
	e2.want(t, "GET", "/subjects?deleted=true", "", 200, `["a"]`)
	e2.want(t, "GET", "/subjects/a/versions?deleted=true", "", 200, `[1,2]`)
	e2.want(t, "GET", "/subjects/a/versions", "", 200, `[2]`)
	e2.want(t, "GET", "/config/a", "", 200, `{"compatibilityLevel":"NONE"}`)
	e2.want(t, "GET", "/schemas/ids/2", "", 200, `{"schema":`+mustJSON(avroV2)+`}`)
	e2.want(t, "GET", "/schemas/ids/3", "", 404, `{"error_code":40403,"message":"Schema 3 not found"}`)
	// Id 3 is still in the topic's history (its tombstone), so it is
	// not handed out again.
	e2.want(t, "POST", "/subjects/a/versions", schemaBody("", avroV3), 200, `{"id":4}`)
}

// TestResyncAfterFailedWrite: after a write that failed (and so may have
// reached the log anyway), the next change reads the topic again first,
// so that an id in the log is not handed out twice. The record another
// writer left in the topic stands in for the unacknowledged write.
func TestResyncAfterFailedWrite(t *testing.T) {
	e := newEnv(t)
	e.want(t, "POST", "/subjects/a/versions", schemaBody("", avroV1), 200, `{"id":1}`)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.b.Addr()), kgo.DefaultProduceTopic(DefaultTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	k, v, _ := record{key: schemaKey("written", 1), value: schemaValue{Subject: "written", Version: 1, ID: 50, Schema: avroV3}}.encode()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: k, Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.reg.wmu.Lock()
	e.reg.stale = true // as write leaves it when a write fails
	e.reg.wmu.Unlock()
	e.want(t, "POST", "/subjects/b/versions", schemaBody("", avroV2), 200, `{"id":51}`)
	e.want(t, "GET", "/subjects/written/versions/1/schema", "", 200, avroV3)
}
