package schemaregistry

import "testing"

// TestSettingErrors covers the answers /config and /mode share the
// handlers of: bodies that do not decode, a delete of what a subject
// does not have, and IMPORT refused per subject.
func TestSettingErrors(t *testing.T) {
	e := newEnv(t)
	e.want(t, "PUT", "/config", `{"compatibility":5}`, 422,
		`{"error_code":422,"message":"Unrecognizable request body: json: cannot unmarshal number into Go struct field .compatibility of type string"}`)
	e.want(t, "PUT", "/mode/s", `{"mode":true}`, 422,
		`{"error_code":422,"message":"Unrecognizable request body: json: cannot unmarshal bool into Go struct field .mode of type string"}`)
	e.want(t, "PUT", "/config/s", `{`, 422, `{"error_code":422,"message":"Unrecognizable request body: unexpected EOF"}`)
	e.want(t, "DELETE", "/config/none", "", 404, `{"error_code":40401,"message":"Subject 'none' not found."}`)
	e.want(t, "DELETE", "/mode/none", "", 404, `{"error_code":40401,"message":"Subject 'none' not found."}`)

	// A subject with versions but no own setting: the delete answers
	// what applied, the global value.
	e.want(t, "POST", "/subjects/s/versions", schemaBody("", avroV1), 200, `{"id":1}`)
	e.want(t, "DELETE", "/config/s", "", 200, `{"compatibilityLevel":"BACKWARD"}`)
	e.want(t, "DELETE", "/mode/s", "", 200, `{"mode":"READWRITE"}`)
	e.want(t, "DELETE", "/mode", "", 200, `{"mode":"READWRITE"}`)

	// IMPORT of a subject: refused while it has versions, unless forced.
	e.want(t, "PUT", "/mode/s", `{"mode":"IMPORT"}`, 422, `{"error_code":42205,"message":"Cannot import since found existing subjects"}`)
	e.want(t, "PUT", "/mode/other", `{"mode":"import"}`, 200, `{"mode":"IMPORT"}`)
	e.want(t, "GET", "/mode/other", "", 200, `{"mode":"IMPORT"}`)
	e.want(t, "PUT", "/mode/s?force=true", `{"mode":"IMPORT"}`, 200, `{"mode":"IMPORT"}`)
	e.want(t, "GET", "/mode", "", 200, `{"mode":"READWRITE"}`)
}

// TestReadErrors covers the version, id and schema-request readers'
// answers that the walk-throughs do not reach.
func TestReadErrors(t *testing.T) {
	e := newEnv(t)
	e.want(t, "POST", "/subjects/s/versions", schemaBody("PROTOBUF", `syntax = "proto3"; message M { int32 a = 1; }`), 200, `{"id":1}`)
	e.want(t, "GET", "/schemas/ids/1/schema", "", 200, `syntax = "proto3"; message M { int32 a = 1; }`)
	e.want(t, "GET", "/schemas/ids/1", "", 200, `{"schemaType":"PROTOBUF","schema":"syntax = \"proto3\"; message M { int32 a = 1; }"}`)
	e.want(t, "GET", "/schemas/ids/x/schema", "", 404, `{"error_code":40403,"message":"Schema x not found"}`)
	e.want(t, "GET", "/subjects/s/versions/1/referencedby", "", 200, `[]`)
	e.want(t, "GET", "/subjects/s/versions/2/referencedby", "", 404, `{"error_code":40402,"message":"Version 2 not found."}`)

	// A soft-deleted version: found with ?deleted=true, and always for
	// referencedby.
	e.want(t, "POST", "/subjects/s/versions", schemaBody("PROTOBUF", `syntax = "proto3"; message M { int32 a = 1; int32 b = 2; }`), 200, `{"id":2}`)
	e.want(t, "DELETE", "/subjects/s/versions/1", "", 200, `1`)
	e.want(t, "GET", "/subjects/s/versions/1", "", 404, `{"error_code":40402,"message":"Version 1 not found."}`)
	e.want(t, "GET", "/subjects/s/versions/1/schema?deleted=true", "", 200, `syntax = "proto3"; message M { int32 a = 1; }`)
	e.want(t, "GET", "/subjects/s/versions/1/referencedby", "", 200, `[]`)
	e.want(t, "GET", "/schemas/ids/1/versions", "", 200, `[]`)
	e.want(t, "GET", "/schemas/ids/1/versions?deleted=true", "", 200, `[{"subject":"s","version":1}]`)

	// Lookup and compatibility read the same body.
	for _, path := range []string{"/subjects/s", "/compatibility/subjects/s/versions/latest"} {
		e.want(t, "POST", path, `[]`, 422,
			`{"error_code":422,"message":"Unrecognizable request body: json: cannot unmarshal array into Go value of type schemaregistry.schemaRequest"}`)
	}
	e.want(t, "POST", "/subjects/s?deleted=true", schemaBody("PROTOBUF", `syntax = "proto3"; message M { int32 a = 1; }`), 200,
		`{"subject":"s","version":1,"id":1,"schemaType":"PROTOBUF","schema":"syntax = \"proto3\"; message M { int32 a = 1; }"}`)
	e.want(t, "POST", "/subjects/s", schemaBody("PROTOBUF", `syntax = "proto3"; message M { int32 a = 1; }`), 404, `{"error_code":40403,"message":"Schema not found"}`)
}
