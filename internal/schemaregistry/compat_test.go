package schemaregistry

import (
	"fmt"
	"testing"
)

// Sources of the rules the table follows.
const (
	srcConfluentEvolution = "Confluent, Schema Evolution and Compatibility: compatibility types table (docs.confluent.io/platform/current/schema-registry/fundamentals/schema-evolution.html)"
	srcAvroResolution     = "Avro specification, Schema Resolution (avro.apache.org/docs/1.11.1/specification/#schema-resolution)"
	srcConfluentProtobuf  = "Confluent, Protobuf serdes: compatibility rules (docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/serdes-protobuf.html)"
	srcProtoUpdating      = "Protocol Buffers language guide, Updating a Message Type (protobuf.dev/programming-guides/proto3/#updating)"
	srcConfluentJSON      = "Confluent, JSON Schema serdes: compatibility rules, open and closed content models (docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/serdes-json.html)"
)

// Avro schemas of the table.
const (
	aBase        = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`
	aAddDefault  = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}]}`
	aAddNoDef    = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}`
	aEmpty       = `{"type":"record","name":"R","fields":[]}`
	aLong        = `{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`
	aString      = `{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}`
	aUnion       = `{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"]}]}`
	aRenamed     = `{"type":"record","name":"S","fields":[{"name":"a","type":"int"}]}`
	aAliased     = `{"type":"record","name":"S","aliases":["R"],"fields":[{"name":"a","type":"int"}]}`
	aDefaultOnly = `{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":0}]}`
	aEnum2       = `{"type":"enum","name":"E","symbols":["A","B"]}`
	aEnum3       = `{"type":"enum","name":"E","symbols":["A","B","C"]}`
	aEnum3Def    = `{"type":"enum","name":"E","symbols":["A","B","C"],"default":"A"}`
	aFixed4      = `{"type":"fixed","name":"F","size":4}`
	aFixed8      = `{"type":"fixed","name":"F","size":8}`
	aArrInt      = `{"type":"array","items":"int"}`
	aArrLong     = `{"type":"array","items":"long"}`
	aMapStr      = `{"type":"map","values":"string"}`
	aMapBytes    = `{"type":"map","values":"bytes"}`
	aFloat       = `"float"`
	aDouble      = `"double"`
)

// Protobuf schemas of the table.
const (
	pBase         = `syntax = "proto3"; package t; message M { int32 a = 1; string s = 2; }`
	pAddField     = `syntax = "proto3"; package t; message M { int32 a = 1; string s = 2; bool b = 3; }`
	pRemoveField  = `syntax = "proto3"; package t; message M { int32 a = 1; reserved 2; }`
	pInt64        = `syntax = "proto3"; package t; message M { int64 a = 1; string s = 2; }`
	pSint32       = `syntax = "proto3"; package t; message M { sint32 a = 1; string s = 2; }`
	pBytes        = `syntax = "proto3"; package t; message M { int32 a = 1; bytes s = 2; }`
	pMsgField     = `syntax = "proto3"; package t; message N { int32 x = 1; } message M { N a = 1; string s = 2; }`
	pPkg          = `syntax = "proto3"; package u; message M { int32 a = 1; string s = 2; }`
	pAddMsg       = `syntax = "proto3"; package t; message M { int32 a = 1; string s = 2; } message Extra { int32 e = 1; }`
	pRenamedField = `syntax = "proto3"; package t; message M { int32 count = 1; string s = 2; }`
	pOneofOne     = `syntax = "proto3"; package t; message M { oneof o { int32 a = 1; } string s = 2; }`
	pOneofTwo     = `syntax = "proto3"; package t; message M { oneof o { int32 a = 1; string s = 2; } }`
	pFixed32      = `syntax = "proto3"; package t; message M { fixed32 a = 1; string s = 2; }`
	pEnumA        = `syntax = "proto3"; package t; enum E { E0 = 0; E1 = 1; } message M { E e = 1; }`
	pEnumB        = `syntax = "proto3"; package t; enum E { E0 = 0; E1 = 1; E2 = 2; } message M { E e = 1; }`
	pRenamedMsg   = `syntax = "proto3"; package t; message M2 { int32 a = 1; string s = 2; }`
	pRequired     = `syntax = "proto2"; package t; message M { optional int32 a = 1; }`
	pRequiredAdd  = `syntax = "proto2"; package t; message M { optional int32 a = 1; required int32 r = 2; }`
	pTimestamp    = `syntax = "proto3"; package t; import "google/protobuf/timestamp.proto"; message M { google.protobuf.Timestamp at = 1; }`
	pDuration     = `syntax = "proto3"; package t; import "google/protobuf/duration.proto"; message M { google.protobuf.Duration at = 1; }`
)

// JSON schemas of the table.
const (
	jOpen          = `{"type":"object","properties":{"a":{"type":"string"}}}`
	jOpenAdd       = `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`
	jOpenAddAny    = `{"type":"object","properties":{"a":{"type":"string"},"b":{}}}`
	jClosed        = `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`
	jClosedAdd     = `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"additionalProperties":false}`
	jClosedEmpty   = `{"type":"object","properties":{},"additionalProperties":false}`
	jRequired      = `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`
	jInteger       = `{"type":"integer"}`
	jNumber        = `{"type":"number"}`
	jString        = `{"type":"string"}`
	jMax10         = `{"type":"string","maxLength":10}`
	jMax20         = `{"type":"string","maxLength":20}`
	jMin5          = `{"type":"integer","minimum":5}`
	jMin0          = `{"type":"integer","minimum":0}`
	jEnumAB        = `{"enum":["a","b"]}`
	jEnumABC       = `{"enum":["a","b","c"]}`
	jOneOf2        = `{"oneOf":[{"type":"string"},{"type":"integer"}]}`
	jOneOf3        = `{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"boolean"}]}`
	jArrStr        = `{"type":"array","items":{"type":"string"}}`
	jArrInt        = `{"type":"array","items":{"type":"integer"}}`
	jPartial       = `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}`
	jPartialAdd    = `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"additionalProperties":{"type":"integer"}}`
	jPartialAddBad = `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":{"type":"integer"}}`
)

type compatCase struct {
	typ    string
	level  string
	prev   []string // registered versions, oldest first
	next   string
	ok     bool
	source string
}

func compatTable() []compatCase {
	B, BT, F, FT, U, UT, N := levelBackward, levelBackwardTransitive, levelForward, levelForwardTransitive, levelFull, levelFullTransitive, levelNone
	one := func(s string) []string { return []string{s} }
	return []compatCase{
		// Avro.
		{typeAvro, B, one(aBase), aAddDefault, true, srcConfluentEvolution + "; BACKWARD: add optional fields"},
		{typeAvro, B, one(aBase), aAddNoDef, false, srcAvroResolution + ": a reader field absent from the writer needs a default"},
		{typeAvro, B, one(aBase), aEmpty, true, srcConfluentEvolution + "; BACKWARD: delete fields"},
		{typeAvro, F, one(aBase), aEmpty, false, srcAvroResolution + ": the old reader's field a has no default"},
		{typeAvro, F, one(aDefaultOnly), aEmpty, true, srcConfluentEvolution + "; FORWARD: delete optional fields"},
		{typeAvro, F, one(aBase), aAddNoDef, true, srcConfluentEvolution + "; FORWARD: add fields"},
		{typeAvro, U, one(aBase), aAddDefault, true, srcConfluentEvolution + "; FULL: add optional fields"},
		{typeAvro, U, one(aBase), aAddNoDef, false, srcConfluentEvolution + "; FULL: only optional fields"},
		{typeAvro, U, one(aDefaultOnly), aEmpty, true, srcConfluentEvolution + "; FULL: delete optional fields"},
		{typeAvro, B, one(aBase), aLong, true, srcAvroResolution + ": int is promoted to long"},
		{typeAvro, F, one(aBase), aLong, false, srcAvroResolution + ": long is not promoted to int"},
		{typeAvro, B, one(aBase), aString, false, srcAvroResolution + ": int does not resolve to string"},
		{typeAvro, B, one(aBase), aUnion, true, srcAvroResolution + ": a reader union takes the writer's branch"},
		{typeAvro, F, one(aBase), aUnion, false, srcAvroResolution + ": a writer union's null has no reader branch"},
		{typeAvro, B, one(aBase), aRenamed, false, srcAvroResolution + ": named types must have the same name"},
		{typeAvro, B, one(aBase), aAliased, true, srcAvroResolution + ": the reader's aliases match the writer's name"},
		{typeAvro, B, one(aEnum2), aEnum3, true, srcAvroResolution + ": every writer symbol is in the reader"},
		{typeAvro, F, one(aEnum2), aEnum3, false, srcAvroResolution + ": a writer symbol absent from the reader without a default is an error"},
		{typeAvro, B, one(aEnum3), aEnum2, false, srcAvroResolution + ": symbol C is unknown to the reader"},
		{typeAvro, F, one(aEnum3Def), aEnum3, true, srcAvroResolution + ": identical symbols"},
		{typeAvro, B, one(aFixed4), aFixed8, false, srcAvroResolution + ": fixed sizes must match"},
		{typeAvro, B, one(aArrInt), aArrLong, true, srcAvroResolution + ": array items resolve recursively (int to long)"},
		{typeAvro, B, one(aMapStr), aMapBytes, true, srcAvroResolution + ": string is promoted to bytes"},
		{typeAvro, B, one(aFloat), aDouble, true, srcAvroResolution + ": float is promoted to double"},
		{typeAvro, F, one(aFloat), aDouble, false, srcAvroResolution + ": double is not promoted to float"},
		{typeAvro, N, one(aBase), aString, true, srcConfluentEvolution + "; NONE: compatibility checks disabled"},
		{typeAvro, B, []string{aString, aBase}, aLong, true, srcConfluentEvolution + "; BACKWARD checks the latest version only"},
		{typeAvro, BT, []string{aString, aBase}, aLong, false, srcConfluentEvolution + "; BACKWARD_TRANSITIVE checks all previous versions (v1's string does not resolve to long)"},
		{typeAvro, BT, []string{aBase, aAddDefault}, aLong, true, srcConfluentEvolution + "; BACKWARD_TRANSITIVE: reads both earlier versions"},
		{typeAvro, FT, []string{aBase, aDefaultOnly}, aEmpty, false, srcConfluentEvolution + "; FORWARD_TRANSITIVE: v1 cannot read data without a"},
		{typeAvro, F, []string{aBase, aDefaultOnly}, aEmpty, true, srcConfluentEvolution + "; FORWARD checks the latest version only"},
		{typeAvro, UT, []string{aBase, aAddDefault}, aAddNoDef, false, srcConfluentEvolution + "; FULL_TRANSITIVE: the new field b has no default, so v1 data cannot be read"},
		{typeAvro, UT, []string{aDefaultOnly, aDefaultOnly}, aEmpty, true, srcConfluentEvolution + "; FULL_TRANSITIVE: delete optional fields"},

		// Protobuf.
		{typeProtobuf, B, one(pBase), pAddField, true, srcProtoUpdating + ": add fields"},
		{typeProtobuf, F, one(pBase), pAddField, true, srcProtoUpdating + ": old code ignores new fields"},
		{typeProtobuf, U, one(pBase), pAddField, true, srcConfluentProtobuf + ": adding fields is FULL compatible"},
		{typeProtobuf, B, one(pBase), pRemoveField, true, srcProtoUpdating + ": fields can be removed (reserve the number)"},
		{typeProtobuf, U, one(pBase), pRemoveField, true, srcConfluentProtobuf + ": removing fields is compatible"},
		{typeProtobuf, B, one(pBase), pInt64, true, srcProtoUpdating + ": int32, uint32, int64, uint64 and bool are compatible"},
		{typeProtobuf, B, one(pBase), pSint32, false, srcProtoUpdating + ": sint32 is not compatible with int32"},
		{typeProtobuf, B, one(pBase), pBytes, true, srcProtoUpdating + ": string and bytes are compatible (valid UTF-8)"},
		{typeProtobuf, B, one(pBase), pFixed32, false, srcProtoUpdating + ": fixed32 is compatible only with sfixed32"},
		{typeProtobuf, B, one(pBase), pMsgField, false, srcConfluentProtobuf + ": changing a field from a scalar to a message is incompatible"},
		{typeProtobuf, B, one(pBase), pPkg, false, srcConfluentProtobuf + ": changing the package is incompatible"},
		{typeProtobuf, B, one(pBase), pAddMsg, true, srcConfluentProtobuf + ": adding a message type is backward compatible"},
		{typeProtobuf, F, one(pBase), pAddMsg, false, srcConfluentEvolution + ": Protobuf, adding new message types is not forward compatible"},
		{typeProtobuf, B, one(pAddMsg), pBase, false, srcConfluentProtobuf + ": removing a message type is incompatible"},
		{typeProtobuf, U, one(pBase), pRenamedField, true, srcProtoUpdating + ": the wire format uses numbers, not names"},
		{typeProtobuf, B, one(pBase), pRenamedMsg, false, srcConfluentProtobuf + ": message M removed (renamed)"},
		{typeProtobuf, B, one(pBase), pOneofOne, true, srcProtoUpdating + ": moving a single field into a new oneof is safe"},
		{typeProtobuf, B, one(pBase), pOneofTwo, false, srcProtoUpdating + ": moving multiple fields into a new oneof is not safe"},
		{typeProtobuf, B, one(pOneofOne), pOneofTwo, false, srcProtoUpdating + ": moving a field into an existing oneof is not safe"},
		{typeProtobuf, U, one(pEnumA), pEnumB, true, srcConfluentProtobuf + ": adding an enum value is compatible"},
		{typeProtobuf, B, one(pRequired), pRequiredAdd, false, srcProtoUpdating + " (proto2): adding a required field is incompatible"},
		{typeProtobuf, B, one(pRequiredAdd), pRequired, false, srcProtoUpdating + " (proto2): removing a required field is incompatible"},
		{typeProtobuf, B, one(pTimestamp), pDuration, false, srcConfluentProtobuf + ": changing a field's message type is incompatible"},
		{typeProtobuf, N, one(pBase), pPkg, true, srcConfluentEvolution + "; NONE: compatibility checks disabled"},
		{typeProtobuf, BT, []string{pAddMsg, pAddMsg}, pBase, false, srcConfluentEvolution + "; BACKWARD_TRANSITIVE: every version"},
		{typeProtobuf, FT, []string{pBase, pAddField}, pRemoveField, true, srcConfluentProtobuf + ": add and remove fields are compatible both ways"},
		{typeProtobuf, UT, []string{pBase, pAddField}, pSint32, false, srcProtoUpdating + ": sint32 and int32 differ on the wire"},

		// JSON Schema.
		{typeJSON, B, one(jOpen), jOpenAdd, false, srcConfluentJSON + ": adding a property to an open content model is not backward compatible"},
		{typeJSON, F, one(jOpen), jOpenAdd, true, srcConfluentJSON + ": the old open model accepts the new property"},
		{typeJSON, B, one(jOpen), jOpenAddAny, true, srcConfluentJSON + ": a property with the empty schema is covered by the open model"},
		{typeJSON, B, one(jClosed), jClosedAdd, true, srcConfluentJSON + ": adding a property to a closed content model is backward compatible"},
		{typeJSON, F, one(jClosed), jClosedAdd, false, srcConfluentJSON + ": the old closed model rejects the new property"},
		{typeJSON, B, one(jClosed), jClosedEmpty, false, srcConfluentJSON + ": removing a property from a closed content model is not backward compatible"},
		{typeJSON, B, one(jOpenAdd), jOpen, true, srcConfluentJSON + ": removing a property from an open content model is backward compatible"},
		{typeJSON, B, one(jOpen), jRequired, false, srcConfluentJSON + ": adding a required property is not backward compatible"},
		{typeJSON, B, one(jRequired), jOpen, true, srcConfluentJSON + ": removing a required property is backward compatible"},
		{typeJSON, B, one(jInteger), jNumber, true, srcConfluentJSON + ": widening integer to number is backward compatible"},
		{typeJSON, B, one(jNumber), jInteger, false, srcConfluentJSON + ": narrowing number to integer is not"},
		{typeJSON, B, one(jString), jInteger, false, srcConfluentJSON + ": changing the type is incompatible"},
		{typeJSON, B, one(jMax10), jMax20, true, srcConfluentJSON + ": increasing maxLength is backward compatible"},
		{typeJSON, B, one(jMax20), jMax10, false, srcConfluentJSON + ": decreasing maxLength is not"},
		{typeJSON, B, one(jMin5), jMin0, true, srcConfluentJSON + ": decreasing minimum is backward compatible"},
		{typeJSON, F, one(jMin5), jMin0, false, srcConfluentJSON + ": the old reader rejects values below 5"},
		{typeJSON, B, one(jEnumAB), jEnumABC, true, srcConfluentJSON + ": extending an enum is backward compatible"},
		{typeJSON, B, one(jEnumABC), jEnumAB, false, srcConfluentJSON + ": narrowing an enum is not"},
		{typeJSON, B, one(jOneOf2), jOneOf3, true, srcConfluentJSON + ": extending a sum type (oneOf) is backward compatible"},
		{typeJSON, B, one(jOneOf3), jOneOf2, false, srcConfluentJSON + ": narrowing a sum type is not"},
		{typeJSON, B, one(jArrStr), jArrInt, false, srcConfluentJSON + ": changing the items' type is incompatible"},
		{typeJSON, B, one(jPartial), jPartialAdd, true, srcConfluentJSON + ": a property added that the partially open model's additionalProperties covers"},
		{typeJSON, B, one(jPartial), jPartialAddBad, false, srcConfluentJSON + ": a property added that additionalProperties does not cover"},
		{typeJSON, B, one(jOpen), jClosed, false, srcConfluentJSON + ": closing an open content model (additionalProperties removed) is not backward compatible"},
		{typeJSON, B, one(jClosed), jOpen, true, srcConfluentJSON + ": opening a closed content model is backward compatible"},
		{typeJSON, U, one(jClosed), jOpen, false, srcConfluentJSON + ": opening a closed model is not forward compatible, and FULL needs both"},
		{typeJSON, U, one(jMax10), jMax10, true, srcConfluentEvolution + "; FULL: an unchanged schema"},
		{typeJSON, N, one(jString), jInteger, true, srcConfluentEvolution + "; NONE: compatibility checks disabled"},
		{typeJSON, BT, []string{jInteger, jNumber}, jInteger, false, srcConfluentEvolution + "; BACKWARD_TRANSITIVE: v2 (number) data is not integer"},
		{typeJSON, B, []string{jNumber, jInteger}, jInteger, true, srcConfluentEvolution + "; BACKWARD: only the latest"},
		{typeJSON, FT, []string{jMax10, jMax20}, jMax10, true, srcConfluentJSON + ": both earlier versions read strings of 10"},
		{typeJSON, UT, []string{jEnumAB, jEnumABC}, jEnumAB, false, srcConfluentJSON + ": FULL_TRANSITIVE: v2's c is not in the new enum"},
	}
}

// TestCompatibilityTable checks pairs of schemas against Confluent's
// documented rules for each type and level (each case names its
// source).
func TestCompatibilityTable(t *testing.T) {
	cases := compatTable()
	if len(cases) < 60 {
		t.Fatalf("%d cases, want at least 60", len(cases))
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d_%s_%s", i, c.typ, c.level), func(t *testing.T) {
			next, err := parseSchema(c.typ, c.next, nil)
			if err != nil {
				t.Fatalf("new schema: %v", err)
			}
			var prev []parsed
			for _, s := range c.prev {
				p, err := parseSchema(c.typ, s, nil)
				if err != nil {
					t.Fatalf("old schema: %v", err)
				}
				prev = append(prev, p)
			}
			msgs := checkCompatibility(c.level, next, prev)
			if got := len(msgs) == 0; got != c.ok {
				t.Errorf("compatible = %v, want %v (%s)\nold %v\nnew %s\nmessages %v", got, c.ok, c.source, c.prev, c.next, msgs)
			}
		})
	}
}
