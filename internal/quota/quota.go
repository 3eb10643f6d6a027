package quota

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Key is a quota's name, as Kafka spells it.
type Key string

// The quota keys Kafka knows for users and client ids.
const (
	ProducerByteRate       Key = "producer_byte_rate"       // bytes per second of Produce requests
	ConsumerByteRate       Key = "consumer_byte_rate"       // bytes per second of Fetch responses
	RequestPercentage      Key = "request_percentage"       // percent of one request thread's time
	ControllerMutationRate Key = "controller_mutation_rate" // partitions created or deleted per second
)

// Keys lists the quota keys in a fixed order.
var Keys = []Key{ProducerByteRate, ConsumerByteRate, RequestPercentage, ControllerMutationRate}

func knownKey(k Key) bool {
	for _, x := range Keys {
		if x == k {
			return true
		}
	}
	return false
}

// Entity names who a quota applies to: a user, a client id or both. A
// part is absent (Has* false), the default of its level (*Default), or a
// name. Entities are comparable and used as map keys.
type Entity struct {
	HasUser       bool
	UserDefault   bool
	User          string
	HasClient     bool
	ClientDefault bool
	Client        string
}

// String renders the entity the way Kafka's tools do:
// "user=alice, client-id=<default>".
func (e Entity) String() string {
	var s string
	if e.HasUser {
		s = "user=" + partString(e.UserDefault, e.User)
	}
	if e.HasClient {
		if s != "" {
			s += ", "
		}
		s += "client-id=" + partString(e.ClientDefault, e.Client)
	}
	return s
}

func partString(def bool, name string) string {
	if def {
		return "<default>"
	}
	return name
}

// Entity types as Kafka's wire protocol names them.
const (
	TypeUser   = "user"
	TypeClient = "client-id"
	TypeIP     = "ip"
)

// Component is one part of an entity as the wire protocol carries it
// (Name nil: the default).
type Component struct {
	Type string
	Name *string
}

// ParseEntity builds an entity from its wire components, with a message
// a person can act on when they do not name one.
func ParseEntity(cs []Component) (Entity, error) {
	var e Entity
	if len(cs) == 0 {
		return e, fmt.Errorf("the quota entity is empty: name a user, a client-id or both")
	}
	for _, c := range cs {
		switch c.Type {
		case TypeUser:
			if e.HasUser {
				return e, fmt.Errorf("the quota entity names user twice")
			}
			e.HasUser, e.UserDefault = true, c.Name == nil
			if c.Name != nil {
				e.User = *c.Name
			}
		case TypeClient:
			if e.HasClient {
				return e, fmt.Errorf("the quota entity names client-id twice")
			}
			e.HasClient, e.ClientDefault = true, c.Name == nil
			if c.Name != nil {
				e.Client = *c.Name
			}
		case TypeIP:
			return e, fmt.Errorf("ip quotas (connection_creation_rate) are not supported; quotas apply to user and client-id entities")
		default:
			return e, fmt.Errorf("unknown quota entity type %q; want user or client-id", c.Type)
		}
	}
	if e.HasUser && !e.UserDefault && e.User == "" {
		return e, fmt.Errorf("the quota entity's user name is empty; omit the name for the default user")
	}
	return e, nil
}

// Components is the entity as wire components, user first.
func (e Entity) Components() []Component {
	var cs []Component
	if e.HasUser {
		cs = append(cs, Component{Type: TypeUser, Name: namePtr(e.UserDefault, e.User)})
	}
	if e.HasClient {
		cs = append(cs, Component{Type: TypeClient, Name: namePtr(e.ClientDefault, e.Client)})
	}
	return cs
}

func namePtr(def bool, name string) *string {
	if def {
		return nil
	}
	return &name
}

// ValidateValue checks a value set for key: byte rates are whole numbers
// of bytes per second, every value is positive and finite.
func ValidateValue(k Key, v float64) error {
	if !knownKey(k) {
		return fmt.Errorf("unknown quota key %q; want producer_byte_rate, consumer_byte_rate, request_percentage or controller_mutation_rate", string(k))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return fmt.Errorf("%s %v: want a positive number", k, v)
	}
	if (k == ProducerByteRate || k == ConsumerByteRate) && v != math.Trunc(v) {
		return fmt.Errorf("%s %v: want a whole number of bytes per second", k, v)
	}
	if v > math.MaxInt64 {
		return fmt.Errorf("%s %v: too large", k, v)
	}
	return nil
}

// Op is one change to an entity's quotas: set Key to Value, or remove it.
type Op struct {
	Key    Key
	Value  float64
	Remove bool
}

// Set is every entity's quotas. The zero Set is empty; a Set is not
// changed once a Manager holds it (With returns a copy).
type Set struct {
	m map[Entity]map[Key]float64
}

// Get returns the entity's value for key.
func (s Set) Get(e Entity, k Key) (float64, bool) {
	v, ok := s.m[e][k]
	return v, ok
}

// Len is the number of entities with a quota.
func (s Set) Len() int { return len(s.m) }

// Entities returns every entity with a quota, sorted by their String.
func (s Set) Entities() []Entity {
	es := make([]Entity, 0, len(s.m))
	for e := range s.m {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].String() < es[j].String() })
	return es
}

// Values returns a copy of the entity's quotas.
func (s Set) Values(e Entity) map[Key]float64 {
	out := make(map[Key]float64, len(s.m[e]))
	for k, v := range s.m[e] {
		out[k] = v
	}
	return out
}

// With returns a copy of s with ops applied to e; it checks each op first.
func (s Set) With(e Entity, ops []Op) (Set, error) {
	for _, op := range ops {
		if !knownKey(op.Key) {
			return s, fmt.Errorf("unknown quota key %q; want producer_byte_rate, consumer_byte_rate, request_percentage or controller_mutation_rate", string(op.Key))
		}
		if !op.Remove {
			if err := ValidateValue(op.Key, op.Value); err != nil {
				return s, err
			}
		}
	}
	n := Set{m: make(map[Entity]map[Key]float64, len(s.m)+1)}
	for k, v := range s.m {
		n.m[k] = v // the inner maps are never changed, only replaced
	}
	vals := make(map[Key]float64, len(s.m[e])+len(ops))
	for k, v := range s.m[e] {
		vals[k] = v
	}
	for _, op := range ops {
		if op.Remove {
			delete(vals, op.Key)
		} else {
			vals[op.Key] = op.Value
		}
	}
	if len(vals) == 0 {
		delete(n.m, e)
	} else {
		n.m[e] = vals
	}
	return n, nil
}

// fileEntry is one entity in the encoded form.
type fileEntry struct {
	User   *string            `json:"user,omitempty"`
	Client *string            `json:"client_id,omitempty"`
	Values map[string]float64 `json:"quotas"`
}

// defaultName marks a default part in the encoded form (Kafka's own
// spelling in its configuration store).
const defaultName = "<default>"

// MarshalJSON encodes the set (the broker's quotas.json).
func (s Set) MarshalJSON() ([]byte, error) {
	out := struct {
		Entities []fileEntry `json:"entities"`
	}{Entities: []fileEntry{}}
	for _, e := range s.Entities() {
		fe := fileEntry{Values: map[string]float64{}}
		if e.HasUser {
			n := partString(e.UserDefault, e.User)
			fe.User = &n
		}
		if e.HasClient {
			n := partString(e.ClientDefault, e.Client)
			fe.Client = &n
		}
		for k, v := range s.m[e] {
			fe.Values[string(k)] = v
		}
		out.Entities = append(out.Entities, fe)
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes what MarshalJSON wrote, checking every value.
func (s *Set) UnmarshalJSON(data []byte) error {
	var in struct {
		Entities []fileEntry `json:"entities"`
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	n := Set{}
	for i, fe := range in.Entities {
		var cs []Component
		if fe.User != nil {
			cs = append(cs, Component{Type: TypeUser, Name: fileName(*fe.User)})
		}
		if fe.Client != nil {
			cs = append(cs, Component{Type: TypeClient, Name: fileName(*fe.Client)})
		}
		e, err := ParseEntity(cs)
		if err != nil {
			return fmt.Errorf("entity %d: %w", i, err)
		}
		var ops []Op
		for k, v := range fe.Values {
			ops = append(ops, Op{Key: Key(k), Value: v})
		}
		if n, err = n.With(e, ops); err != nil {
			return fmt.Errorf("entity %d (%s): %w", i, e, err)
		}
	}
	*s = n
	return nil
}

func fileName(s string) *string {
	if s == defaultName {
		return nil
	}
	return &s
}

// FormatValue renders a value the way the CLI prints it: byte rates and
// whole numbers without a fraction.
func FormatValue(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
