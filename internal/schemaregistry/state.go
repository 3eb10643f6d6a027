package schemaregistry

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// version is one registered version of a subject: a SCHEMA record.
type version struct {
	subject string
	version int
	id      int
	typ     string // AVRO, PROTOBUF or JSON
	refs    []Reference
	schema  string
	deleted bool // soft-deleted
}

// idSchema is what an id names: a schema, its type and references.
type idSchema struct {
	typ    string
	schema string
	refs   []Reference
	uses   int // versions (soft-deleted ones too) that carry the id
}

// state is the registry's view of the _schemas topic: every record
// applied in order. It is not safe for concurrent use; Registry.mu
// guards it.
type state struct {
	subjects map[string]map[int]*version
	ids      map[int]*idSchema
	byKey    map[string]int // dedupKey -> id
	maxID    int            // highest id ever seen, deleted ones included
	config   setting        // compatibility levels (CONFIG records)
	mode     setting        // modes (MODE records)
	records  int64          // records applied
}

func newState() *state {
	return &state{
		subjects: map[string]map[int]*version{},
		ids:      map[int]*idSchema{},
		byKey:    map[string]int{},
		config:   setting{def: defaultCompatibility, subjects: map[string]string{}},
		mode:     setting{def: modeReadWrite, subjects: map[string]string{}},
	}
}

// setting is a value with a global default and a value of a subject's
// own: the compatibility level and the mode.
type setting struct {
	def      string            // what applies when no global value is set
	global   string            // "" when not set
	subjects map[string]string // the subjects' own values
}

// of is the value that applies to subject ("" the global one).
func (s *setting) of(subject string) string {
	if v, ok := s.subjects[subject]; ok && subject != "" {
		return v
	}
	if s.global != "" {
		return s.global
	}
	return s.def
}

// own is subject's own value, if it has one.
func (s *setting) own(subject string) (string, bool) {
	v, ok := s.subjects[subject]
	return v, ok
}

// set sets subject's value ("" the global one).
func (s *setting) set(subject, v string) {
	if subject == "" {
		s.global = v
	} else {
		s.subjects[subject] = v
	}
}

// clear removes subject's value ("" the global one).
func (s *setting) clear(subject string) {
	if subject == "" {
		s.global = ""
	} else {
		delete(s.subjects, subject)
	}
}

// dedupKey identifies a schema for id reuse: the same type, stored text
// and references get the same id, in any subject.
func dedupKey(typ, schema string, refs []Reference) string {
	r, _ := json.Marshal(refs)
	return normType(typ) + "\x00" + schema + "\x00" + string(r)
}

// decodeRecord turns a record read from the topic into the form apply
// takes. Records of key types it does not know are skipped (ok false).
func decodeRecord(k, v []byte) (rec record, ok bool, err error) {
	var key struct {
		KeyType string  `json:"keytype"`
		Subject *string `json:"subject"`
		Version int     `json:"version"`
		Magic   int     `json:"magic"`
	}
	if err := json.Unmarshal(k, &key); err != nil {
		return rec, false, fmt.Errorf("key %q: %w", k, err)
	}
	rec.key = recordKey{KeyType: key.KeyType, Subject: key.Subject, Version: key.Version, Magic: key.Magic}
	var val any
	switch key.KeyType {
	case keySchema:
		val = &schemaValue{}
	case keyConfig:
		val = &configValue{}
	case keyMode:
		val = &modeValue{}
	case keyDeleteSubject:
		val = &deleteSubjectValue{}
	case keyClearSubject:
		val = &clearSubjectValue{}
	default:
		return rec, false, nil
	}
	if v == nil {
		return rec, true, nil
	}
	if err := json.Unmarshal(v, val); err != nil {
		return rec, false, fmt.Errorf("value of %s: %w", k, err)
	}
	// apply takes values, not pointers.
	switch x := val.(type) {
	case *schemaValue:
		rec.value = *x
	case *configValue:
		rec.value = *x
	case *modeValue:
		rec.value = *x
	case *deleteSubjectValue:
		rec.value = *x
	case *clearSubjectValue:
		rec.value = *x
	}
	return rec, true, nil
}

// apply applies one record.
func (s *state) apply(r record) {
	s.records++
	subject := deref(r.key.Subject)
	switch r.key.KeyType {
	case keySchema:
		if r.value == nil {
			s.removeVersion(subject, r.key.Version)
			return
		}
		v := r.value.(schemaValue)
		s.putVersion(&version{subject: v.Subject, version: v.Version, id: v.ID, typ: normType(v.SchemaType),
			refs: v.References, schema: v.Schema, deleted: v.Deleted})
	case keyConfig:
		if r.value == nil {
			s.config.clear(subject)
			return
		}
		s.config.set(subject, r.value.(configValue).CompatibilityLevel)
	case keyMode:
		if r.value == nil {
			s.mode.clear(subject)
			return
		}
		s.mode.set(subject, r.value.(modeValue).Mode)
	case keyDeleteSubject:
		if r.value == nil {
			return
		}
		d := r.value.(deleteSubjectValue)
		for n, v := range s.subjects[d.Subject] {
			if n <= d.Version {
				v.deleted = true
			}
		}
	case keyClearSubject:
		if r.value == nil {
			return
		}
		c := r.value.(clearSubjectValue)
		for n, v := range s.subjects[c.Subject] {
			if v.deleted {
				s.removeVersion(c.Subject, n)
			}
		}
	}
}

func (s *state) putVersion(v *version) {
	vs := s.subjects[v.subject]
	if vs == nil {
		vs = map[int]*version{}
		s.subjects[v.subject] = vs
	}
	if old := vs[v.version]; old != nil {
		s.dropUse(old.id)
	}
	vs[v.version] = v
	is := s.ids[v.id]
	if is == nil {
		is = &idSchema{typ: v.typ, schema: v.schema, refs: v.refs}
		s.ids[v.id] = is
		s.byKey[dedupKey(v.typ, v.schema, v.refs)] = v.id
	}
	is.uses++
	s.maxID = max(s.maxID, v.id)
}

func (s *state) removeVersion(subject string, n int) {
	vs := s.subjects[subject]
	v := vs[n]
	if v == nil {
		return
	}
	delete(vs, n)
	if len(vs) == 0 {
		delete(s.subjects, subject)
	}
	s.dropUse(v.id)
}

func (s *state) dropUse(id int) {
	is := s.ids[id]
	if is == nil {
		return
	}
	if is.uses--; is.uses <= 0 {
		delete(s.ids, id)
		if s.byKey[dedupKey(is.typ, is.schema, is.refs)] == id {
			delete(s.byKey, dedupKey(is.typ, is.schema, is.refs))
		}
	}
}

// versions returns a subject's versions in order, soft-deleted ones
// only with deleted.
func (s *state) versions(subject string, deleted bool) []*version {
	var out []*version
	for _, v := range s.subjects[subject] {
		if deleted || !v.deleted {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out
}

// latest is a subject's highest live version, or nil.
func (s *state) latest(subject string) *version {
	vs := s.versions(subject, false)
	if len(vs) == 0 {
		return nil
	}
	return vs[len(vs)-1]
}

// nextVersion is the version a new schema in subject gets: one above
// any it has had, soft-deleted ones included.
func (s *state) nextVersion(subject string) int {
	n := 0
	for v := range s.subjects[subject] {
		n = max(n, v)
	}
	return n + 1
}

// subjectNames lists subjects with a live version (or any, with deleted).
func (s *state) subjectNames(deleted bool) []string {
	var out []string
	for name := range s.subjects {
		if len(s.versions(name, deleted)) > 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// referencedBy lists the ids of live versions that reference subject's
// version n.
func (s *state) referencedBy(subject string, n int) []int {
	var out []int
	for _, vs := range s.subjects {
		for _, v := range vs {
			if v.deleted {
				continue
			}
			for _, r := range v.refs {
				if r.Subject == subject && r.Version == n && !slices.Contains(out, v.id) {
					out = append(out, v.id)
				}
			}
		}
	}
	sort.Ints(out)
	return out
}

// compatibility is the level that applies to subject.
func (s *state) compatibility(subject string) string { return s.config.of(subject) }

// modeOf is the mode that applies to subject.
func (s *state) modeOf(subject string) string { return s.mode.of(subject) }
