package schemaregistry

import (
	"fmt"

	"github.com/hamba/avro/v2"
)

// Avro: parsed with hamba/avro, each schema with its own name cache
// (the library's default cache is global and would let one subject's
// named types leak into another's). References are named types that
// the schema uses by full name: they are parsed first, into the same
// cache. Compatibility is the Avro specification's schema resolution,
// as hamba/avro checks it (reader and writer).

type avroSchema struct {
	text   string
	schema avro.Schema
}

func parseAvro(text string, deps []namedSchema) (parsed, error) {
	cache := &avro.SchemaCache{}
	for _, d := range deps {
		if _, err := avro.ParseWithCache(d.schema, "", cache); err != nil {
			return nil, fmt.Errorf("reference %s: %w", d.name, err)
		}
	}
	s, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, err
	}
	return &avroSchema{text: text, schema: s}, nil
}

func (a *avroSchema) canonical(normalize bool) string {
	return canonicalText(typeAvro, a.text, normalize)
}

func (a *avroSchema) canRead(writer parsed) []string {
	w, ok := writer.(*avroSchema)
	if !ok {
		return []string{"the schemas are of different types"}
	}
	if err := avro.NewSchemaCompatibility().Compatible(a.schema, w.schema); err != nil {
		return []string{err.Error()}
	}
	return nil
}
