package schemaregistry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Schema types, as the REST API and the _schemas topic name them.
const (
	typeAvro     = "AVRO"
	typeProtobuf = "PROTOBUF"
	typeJSON     = "JSON"
)

// Reference names a schema that another one imports: Name is how the
// importing schema refers to it (an Avro full name, a .proto import path,
// a JSON Schema $ref URL), Subject and Version where it is registered.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// namedSchema is a resolved reference: the name it is imported by and
// its text. A schema's dependencies are handed to its parser in the
// order a depth-first walk finishes them, each once, so that every
// dependency comes before the schemas that import it.
type namedSchema struct {
	name   string
	schema string
}

// parsed is a schema that parsed and checked as valid for its type.
type parsed interface {
	// canonical is the text stored and compared to find a schema
	// registered before: whitespace and formatting removed, meaning kept;
	// with normalize also the order of what has no order.
	canonical(normalize bool) string
	// canRead reports what keeps a reader using this schema from
	// reading data written with writer (of the same type); none when
	// it can.
	canRead(writer parsed) []string
}

// parseSchema parses text as a schema of type typ (AVRO when empty)
// whose references resolved to deps.
func parseSchema(typ, text string, deps []namedSchema) (parsed, error) {
	switch typ {
	case "", typeAvro:
		return parseAvro(text, deps)
	case typeProtobuf:
		return parseProtobuf(text, deps)
	case typeJSON:
		return parseJSONSchema(text, deps)
	}
	return nil, fmt.Errorf("unknown schema type %q (want AVRO, PROTOBUF or JSON)", typ)
}

// canonicalText is the canonical form of a schema's text (see
// parsed.canonical); it needs no parse, so that finding a schema
// registered before costs no more than reformatting it.
func canonicalText(typ, text string, normalize bool) string {
	switch normType(typ) {
	case typeProtobuf:
		if normalize {
			return protoTokens(text)
		}
		return strings.TrimSpace(text)
	}
	return compactJSON(text, normalize)
}

// normType is typ as stored and shown: AVRO for empty.
func normType(typ string) string {
	if typ == "" {
		return typeAvro
	}
	return typ
}

// compactJSON removes insignificant whitespace from a JSON text;
// with sortKeys it also orders every object's keys.
func compactJSON(text string, sortKeys bool) string {
	if sortKeys {
		var v any
		d := json.NewDecoder(bytes.NewReader([]byte(text)))
		d.UseNumber()
		if err := d.Decode(&v); err == nil {
			var b bytes.Buffer
			e := json.NewEncoder(&b)
			e.SetEscapeHTML(false)
			if e.Encode(v) == nil {
				return string(bytes.TrimRight(b.Bytes(), "\n"))
			}
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return text
	}
	return b.String()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
