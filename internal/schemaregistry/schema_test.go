package schemaregistry

import "testing"

// TestParseSchemas checks what each type accepts and refuses: JSON
// Schema drafts by their $schema (built in, never fetched), Protobuf's
// well-known types, Avro named types only from references.
func TestParseSchemas(t *testing.T) {
	for _, c := range []struct {
		typ, text string
		ok        bool
	}{
		{typeJSON, `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, true},
		{typeJSON, `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"a":{"type":"string"}}}`, true},
		{typeJSON, `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`, true},
		{typeJSON, `{"type":"object","properties":{"a":{"$ref":"http://example.com/remote.json"}}}`, false}, // never fetched
		{typeJSON, `{"type":17}`, false},
		{typeJSON, `[1,2]`, false},
		{typeProtobuf, `syntax = "proto3"; import "google/protobuf/any.proto"; import "google/protobuf/struct.proto"; import "google/protobuf/wrappers.proto"; message M { google.protobuf.Any a = 1; google.protobuf.Struct s = 2; google.protobuf.StringValue w = 3; }`, true},
		{typeProtobuf, `syntax = "proto3"; message M { Missing m = 1; }`, false},
		{typeProtobuf, `syntax = "proto3"; import "other.proto"; message M { int32 a = 1; }`, false},
		{typeProtobuf, `syntax = "proto2"; message M { required int32 a = 1; }`, true},
		{typeAvro, `{"type":"record","name":"R","fields":[{"name":"a","type":"Other"}]}`, false},
		{typeAvro, `{"type":"enum","name":"E","symbols":["A","A"]}`, false},
		{typeAvro, `"string"`, true},
		{"XML", `<a/>`, false},
	} {
		_, err := parseSchema(c.typ, c.text, nil)
		if (err == nil) != c.ok {
			t.Errorf("%s %s: err %v, want ok=%v", c.typ, c.text, err, c.ok)
		}
	}
}
