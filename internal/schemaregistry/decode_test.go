package schemaregistry

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protowire"
)

// framed prefixes data with Confluent's wire header for id.
func framed(id int, data ...byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), data...)
}

// TestDecode: records in Confluent's wire format decode to JSON with
// their Avro, JSON Schema and Protobuf schemas (nested Protobuf messages
// by their indexes); other bytes and unknown ids are not decoded; data
// that does not fit the schema reports why.
func TestDecode(t *testing.T) {
	e := newEnv(t)
	register := func(subject, typ, schema string) int {
		t.Helper()
		status, body := e.do(t, "POST", "/subjects/"+subject+"/versions", schemaBody(typ, schema))
		if status != http.StatusOK {
			t.Fatalf("register %s: %d %s", subject, status, body)
		}
		var r struct{ ID int }
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	const avroText = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int"}]}`
	avroID := register("orders-value", "", avroText)
	jsonID := register("events-value", typeJSON, `{"type":"object","properties":{"n":{"type":"integer"}}}`)
	protoID := register("items-value", typeProtobuf, `syntax = "proto3"; package shop; message A { string a = 1; } message Item { string name = 1; int64 count = 2; message Part { string x = 1; } }`)

	sch := avro.MustParse(avroText)
	data, err := avro.Marshal(sch, map[string]any{"id": "o-1", "qty": 3})
	if err != nil {
		t.Fatal(err)
	}
	var item []byte
	item = protowire.AppendTag(item, 1, protowire.BytesType)
	item = protowire.AppendString(item, "bolt")
	item = protowire.AppendTag(item, 2, protowire.VarintType)
	item = protowire.AppendVarint(item, 7)
	var part []byte
	part = protowire.AppendTag(part, 1, protowire.BytesType)
	part = protowire.AppendString(part, "p")
	idx := func(is ...int64) []byte {
		b := binary.AppendVarint(nil, int64(len(is)))
		for _, i := range is {
			b = binary.AppendVarint(b, i)
		}
		return b
	}
	for _, c := range []struct {
		name            string
		in              []byte
		typ, msg, json_ string
	}{
		{"avro", framed(avroID, data...), typeAvro, "", `{"id":"o-1","qty":3}`},
		{"json", framed(jsonID, []byte(`{"n":5}`)...), typeJSON, "", `{"n":5}`},
		{"protobuf, index 1", framed(protoID, append(idx(1), item...)...), typeProtobuf, "shop.Item", `{"name":"bolt","count":"7"}`},
		{"protobuf, nested", framed(protoID, append(idx(1, 0), part...)...), typeProtobuf, "shop.Item.Part", `{"x":"p"}`},
		{"protobuf, first message", framed(protoID, append([]byte{0}, part...)...), typeProtobuf, "shop.A", `{"a":"p"}`},
	} {
		d := e.reg.Decode(c.in)
		if d == nil || d.Error != "" || d.SchemaType != c.typ || d.Message != c.msg || !sameJSON(string(d.JSON), c.json_) {
			t.Errorf("%s: %+v (json %s), want %s %s %s", c.name, d, d.JSON, c.typ, c.msg, c.json_)
		}
	}
	if d := e.reg.Decode(framed(avroID, data...)); len(d.Subjects) != 1 || d.Subjects[0] != "orders-value" {
		t.Errorf("subjects of the Avro id: %v", d.Subjects)
	}
	for _, in := range [][]byte{[]byte(`{"plain":"json"}`), {0, 0}, framed(9999, 1, 2)} {
		if d := e.reg.Decode(in); d != nil {
			t.Errorf("Decode(%q) = %+v, want nil", in, d)
		}
	}
	for name, in := range map[string][]byte{
		"avro cut short":  framed(avroID, data[:2]...),
		"json not json":   framed(jsonID, []byte("{nope")...),
		"protobuf no msg": framed(protoID, append(idx(5), item...)...),
	} {
		if d := e.reg.Decode(in); d == nil || d.Error == "" || d.JSON != nil {
			t.Errorf("%s: %+v, want an error", name, d)
		}
	}
}
