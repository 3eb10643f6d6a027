package schemaregistry

import "testing"

// FuzzDecodeRecord feeds arbitrary keys and values of the _schemas
// topic to the decoder and the state. Invariants: no panic; a record
// that decodes applies without panicking; the state's id table never
// counts a negative use.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}`), []byte(`{"subject":"s","version":1,"id":1,"schema":"\"int\"","deleted":false}`))
	f.Add([]byte(`{"keytype":"CONFIG","subject":null,"magic":0}`), []byte(`{"compatibilityLevel":"FULL"}`))
	f.Add([]byte(`{"keytype":"MODE","subject":"s","magic":0}`), []byte(nil))
	f.Add([]byte(`{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}`), []byte(`{"subject":"s","version":3}`))
	f.Add([]byte(`{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}`), []byte(`{"subject":"s"}`))
	f.Add([]byte(`{"keytype":"NOOP","magic":0}`), []byte(nil))
	f.Fuzz(func(t *testing.T, k, v []byte) {
		st := newState()
		for range 2 { // twice: replacing a version must keep the counts right
			rec, ok, err := decodeRecord(k, v)
			if err != nil || !ok {
				return
			}
			st.apply(rec)
		}
		for id, is := range st.ids {
			if is.uses <= 0 {
				t.Fatalf("id %d has %d uses", id, is.uses)
			}
		}
	})
}

// FuzzParseSchema parses arbitrary text as each schema type and checks
// a schema that parses against itself. Invariants: no panic; a schema
// is compatible with itself at every level.
func FuzzParseSchema(f *testing.F) {
	f.Add(typeAvro, aAddDefault)
	f.Add(typeProtobuf, pAddMsg)
	f.Add(typeJSON, jPartialAdd)
	f.Add(typeJSON, `{"definitions":{"n":{"type":"object","properties":{"next":{"$ref":"#/definitions/n"}}}},"$ref":"#/definitions/n"}`)
	f.Fuzz(func(t *testing.T, typ, text string) {
		p, err := parseSchema(typ, text, nil)
		if err != nil {
			return
		}
		if msgs := checkCompatibility(levelFullTransitive, p, []parsed{p}); len(msgs) > 0 {
			t.Fatalf("%s schema %q incompatible with itself: %v", typ, text, msgs)
		}
		_ = p.canonical(true)
	})
}
