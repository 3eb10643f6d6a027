package schemaregistry

import (
	"encoding/json"
	"fmt"
)

// The records of the _schemas topic, in the JSON that Confluent's
// registry writes, so that either can read the other's topic. Keys
// (field order as Confluent writes them):
//
//	{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}
//	{"keytype":"CONFIG","subject":"orders-value","magic":0}   subject null: the global config
//	{"keytype":"MODE","subject":null,"magic":0}
//	{"keytype":"DELETE_SUBJECT","subject":"orders-value","magic":0}
//	{"keytype":"CLEAR_SUBJECT","subject":"orders-value","magic":0}
//	{"keytype":"NOOP","magic":0}
//
// Values:
//
//	SCHEMA          {"subject":..,"version":1,"id":7,"schemaType":"PROTOBUF","references":[..],"schema":"..","deleted":false}
//	                (schemaType left out for AVRO, references when empty)
//	CONFIG          {"compatibilityLevel":"BACKWARD"}
//	MODE            {"mode":"READONLY"}
//	DELETE_SUBJECT  {"subject":..,"version":3}: versions up to 3 soft-deleted
//	CLEAR_SUBJECT   {"subject":..}: soft-deleted versions removed
//
// A null value (tombstone) removes the key: a hard-deleted version, a
// deleted subject config or mode.

const (
	keySchema        = "SCHEMA"
	keyConfig        = "CONFIG"
	keyMode          = "MODE"
	keyDeleteSubject = "DELETE_SUBJECT"
	keyClearSubject  = "CLEAR_SUBJECT"
	keyNoop          = "NOOP"
)

// recordKey is any key of the topic. Subject is a pointer so that the
// global config and mode keys carry "subject":null.
type recordKey struct {
	KeyType string  `json:"keytype"`
	Subject *string `json:"subject,omitempty"`
	Version int     `json:"version,omitempty"`
	Magic   int     `json:"magic"`
}

// MarshalJSON writes the key's fields in Confluent's order, with
// "subject":null for the global CONFIG and MODE keys.
func (k recordKey) MarshalJSON() ([]byte, error) {
	kt, _ := json.Marshal(k.KeyType)
	switch k.KeyType {
	case keySchema:
		s, _ := json.Marshal(deref(k.Subject))
		return fmt.Appendf(nil, `{"keytype":%s,"subject":%s,"version":%d,"magic":%d}`, kt, s, k.Version, k.Magic), nil
	case keyNoop:
		return fmt.Appendf(nil, `{"keytype":%s,"magic":%d}`, kt, k.Magic), nil
	}
	s := []byte("null")
	if k.Subject != nil {
		s, _ = json.Marshal(*k.Subject)
	}
	return fmt.Appendf(nil, `{"keytype":%s,"subject":%s,"magic":%d}`, kt, s, k.Magic), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func schemaKey(subject string, version int) recordKey {
	return recordKey{KeyType: keySchema, Subject: &subject, Version: version, Magic: 1}
}

// subjectKey is a CONFIG, MODE, DELETE_SUBJECT or CLEAR_SUBJECT key;
// subject "" is the global one.
func subjectKey(keyType, subject string) recordKey {
	k := recordKey{KeyType: keyType}
	if subject != "" {
		k.Subject = &subject
	}
	return k
}

type schemaValue struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
	Deleted    bool        `json:"deleted"`
}

// record is v's SCHEMA record, marked soft-deleted with deleted.
func (v *version) record(deleted bool) record {
	sv := schemaValue{Subject: v.subject, Version: v.version, ID: v.id, References: v.refs, Schema: v.schema, Deleted: deleted}
	if v.typ != typeAvro {
		sv.SchemaType = v.typ
	}
	return record{key: schemaKey(v.subject, v.version), value: sv}
}

type configValue struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

type modeValue struct {
	Mode string `json:"mode"`
}

type deleteSubjectValue struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

type clearSubjectValue struct {
	Subject string `json:"subject"`
}

// record is one key and value to write; a nil value is a tombstone.
type record struct {
	key   recordKey
	value any
}

func (r record) encode() (k, v []byte, err error) {
	if k, err = json.Marshal(r.key); err != nil {
		return nil, nil, err
	}
	if r.value == nil {
		return k, nil, nil
	}
	v, err = json.Marshal(r.value)
	return k, v, err
}
