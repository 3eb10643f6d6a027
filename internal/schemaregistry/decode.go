package schemaregistry

// Record decoding for the console's message browser: a key or value in
// Confluent's wire format (a zero magic byte, the schema id as a
// big-endian int32, then the data) is decoded with the registered schema
// to JSON. Avro data is read with hamba/avro; JSON Schema data is JSON
// already; Protobuf data starts with the message indexes (Confluent's
// varint list, a single 0 for the file's first message) and is read with
// the compiled descriptor (dynamicpb) and written with protojson.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Decoded is a record key or value decoded with its schema.
type Decoded struct {
	SchemaID   int    `json:"schema_id"`
	SchemaType string `json:"schema_type"`       // AVRO, PROTOBUF or JSON
	Message    string `json:"message,omitempty"` // Protobuf: the message's full name
	// Subjects are the subjects with a version that uses the schema (for
	// access checks).
	Subjects []string        `json:"-"`
	JSON     json.RawMessage `json:"json,omitempty"`
	Error    string          `json:"error,omitempty"` // the data did not decode with the schema
}

// maxDecodeCache bounds the parsed schemas kept for decoding.
const maxDecodeCache = 1024

// decodeCache holds parsed schemas by id (ids never change meaning).
type decodeCache struct {
	mu sync.Mutex // guards m
	m  map[int]parsed
}

// Framed reports whether b is in Confluent's wire format.
func Framed(b []byte) bool { return len(b) >= 5 && b[0] == 0 }

// Decode decodes b, a key or value in Confluent's wire format, with the
// schema its id names. It returns nil when b is not in that format or
// the id is not registered here. A Decoded whose data did not decode
// carries the error instead of JSON.
func (r *Registry) Decode(b []byte) *Decoded {
	if !Framed(b) {
		return nil
	}
	id := int(int32(binary.BigEndian.Uint32(b[1:5])))
	r.mu.RLock()
	is := r.st.ids[id]
	var subjects []string
	var deps []namedSchema
	var err error
	if is != nil {
		for _, sv := range r.usesLocked(id, false) {
			subjects = append(subjects, sv.Subject)
		}
		deps, _, err = r.resolveLocked(is.refs)
	}
	r.mu.RUnlock()
	if is == nil {
		return nil
	}
	d := &Decoded{SchemaID: id, SchemaType: normType(is.typ), Subjects: subjects}
	if err == nil {
		var p parsed
		if p, err = r.parsedFor(id, is, deps); err == nil {
			d.JSON, d.Message, err = decodeWith(p, b[5:])
		}
	}
	if err != nil {
		d.JSON, d.Error = nil, err.Error()
	}
	return d
}

func (r *Registry) parsedFor(id int, is *idSchema, deps []namedSchema) (parsed, error) {
	c := &r.decoders
	c.mu.Lock()
	p := c.m[id]
	c.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p, err := parseSchema(is.typ, is.schema, deps)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxDecodeCache {
		c.m = map[int]parsed{}
	}
	c.m[id] = p
	c.mu.Unlock()
	return p, nil
}

func decodeWith(p parsed, data []byte) (json.RawMessage, string, error) {
	switch s := p.(type) {
	case *avroSchema:
		var v any
		if err := avro.Unmarshal(s.schema, data, &v); err != nil {
			return nil, "", fmt.Errorf("avro: %w", err)
		}
		out, err := json.Marshal(v)
		return out, "", err
	case *jsonSchema:
		if !json.Valid(data) {
			return nil, "", errors.New("the data after the schema id is not JSON")
		}
		return json.RawMessage(data), "", nil
	case *protoSchema:
		md, rest, err := protoMessage(s.file, data)
		if err != nil {
			return nil, "", err
		}
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(rest, m); err != nil {
			return nil, string(md.FullName()), fmt.Errorf("protobuf: %w", err)
		}
		out, err := protojson.Marshal(m)
		return out, string(md.FullName()), err
	}
	return nil, "", errors.New("unknown schema type")
}

// protoMessage reads the message indexes at the start of data and
// returns the message they name in f and the data after them.
func protoMessage(f protoreflect.FileDescriptor, data []byte) (protoreflect.MessageDescriptor, []byte, error) {
	n, k := binary.Varint(data)
	if k <= 0 {
		return nil, nil, errors.New("protobuf: bad message index count")
	}
	data = data[k:]
	idx := []int64{0}
	if n != 0 {
		if n < 0 || n > 32 {
			return nil, nil, fmt.Errorf("protobuf: %d message indexes", n)
		}
		idx = idx[:0]
		for range n {
			i, k := binary.Varint(data)
			if k <= 0 {
				return nil, nil, errors.New("protobuf: bad message index")
			}
			idx, data = append(idx, i), data[k:]
		}
	}
	ms := f.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range idx {
		if i < 0 || int(i) >= ms.Len() {
			return nil, nil, fmt.Errorf("protobuf: message index %v names no message of the schema", idx)
		}
		md = ms.Get(int(i))
		ms = md.Messages()
	}
	return md, data, nil
}
