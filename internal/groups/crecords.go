package groups

// Records of consumer-protocol groups in the internal log.
//
// Kafka keeps a consumer group in several record types of its own; Sluice
// keeps one record per group and one per member, under key versions that
// Kafka does not use (so nothing that reads Kafka's formats mistakes
// them), with JSON values:
//
//	key  int16 version 0x5301, string group            -> group record
//	     {"v":1,"epoch":..,"assignEpoch":..,"assignor":..,"meta":..}
//	key  int16 version 0x5302, string group, string member -> member record
//	     {"v":1, the fields of cmember}
//
// Strings in keys are int16 length + bytes, as in Kafka's keys. A null
// value is a tombstone. Every change of a consumer group is one append of
// the records it touches (one RecordBatch, so all or nothing across a
// crash), fsynced before the heartbeat's reply.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
)

const (
	cgroupKeyVersion  = 0x5301
	cmemberKeyVersion = 0x5302
	cValueVersion     = 1
)

func appendKeyString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func cgroupKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, cgroupKeyVersion)
	return appendKeyString(b, group)
}

func cmemberKey(group, member string) []byte {
	b := binary.BigEndian.AppendUint16(nil, cmemberKeyVersion)
	b = appendKeyString(b, group)
	return appendKeyString(b, member)
}

// readKeyStrings decodes the n strings after a key's version.
func readKeyStrings(k []byte, n int) ([]string, error) {
	k = k[2:]
	var out []string
	for range n {
		if len(k) < 2 {
			return nil, fmt.Errorf("%w: short key", errBadRecord)
		}
		l := int(binary.BigEndian.Uint16(k))
		k = k[2:]
		if len(k) < l {
			return nil, fmt.Errorf("%w: short key", errBadRecord)
		}
		out = append(out, string(k[:l]))
		k = k[l:]
	}
	if len(k) != 0 {
		return nil, fmt.Errorf("%w: %d trailing key bytes", errBadRecord, len(k))
	}
	return out, nil
}

type cgroupValue struct {
	V           int    `json:"v"`
	Epoch       int32  `json:"epoch"`
	AssignEpoch int32  `json:"assignEpoch"`
	Assignor    string `json:"assignor,omitempty"`
	Meta        string `json:"meta,omitempty"`
}

type cmemberValue struct {
	V int `json:"v"`
	cmember
}

func (cg *cgroup) value() []byte {
	b, _ := json.Marshal(cgroupValue{V: cValueVersion, Epoch: cg.Epoch, AssignEpoch: cg.AssignEpoch, Assignor: cg.Assignor, Meta: cg.Meta})
	return b
}

func (m *cmember) value() []byte {
	b, _ := json.Marshal(cmemberValue{V: cValueVersion, cmember: *m})
	return b
}

// cdecoded is a decoded consumer-group record.
type cdecoded struct {
	group  string
	member string // "" for a group record
	gv     *cgroupValue
	mv     *cmemberValue
}

func decodeConsumerRecord(r kv) (cdecoded, error) {
	var d cdecoded
	switch binary.BigEndian.Uint16(r.Key) {
	case cgroupKeyVersion:
		s, err := readKeyStrings(r.Key, 1)
		if err != nil {
			return d, err
		}
		d.group = s[0]
		if r.Value != nil {
			d.gv = new(cgroupValue)
			if err := json.Unmarshal(r.Value, d.gv); err != nil || d.gv.V != cValueVersion {
				return d, fmt.Errorf("%w: consumer group value (version %d): %v", errBadRecord, d.gv.V, err)
			}
		}
	case cmemberKeyVersion:
		s, err := readKeyStrings(r.Key, 2)
		if err != nil {
			return d, err
		}
		d.group, d.member = s[0], s[1]
		if d.member == "" {
			return d, fmt.Errorf("%w: consumer member record without a member id", errBadRecord)
		}
		if r.Value != nil {
			d.mv = new(cmemberValue)
			if err := json.Unmarshal(r.Value, d.mv); err != nil || d.mv.V != cValueVersion {
				return d, fmt.Errorf("%w: consumer member value (version %d): %v", errBadRecord, d.mv.V, err)
			}
			if d.mv.ID != d.member {
				return d, fmt.Errorf("%w: consumer member record of %q holds %q", errBadRecord, d.member, d.mv.ID)
			}
		}
	default:
		return d, fmt.Errorf("%w: not a consumer group key", errBadRecord)
	}
	return d, nil
}

// isConsumerKey reports whether a key is a consumer-group record's.
func isConsumerKey(k []byte) bool {
	if len(k) < 2 {
		return false
	}
	v := binary.BigEndian.Uint16(k)
	return v == cgroupKeyVersion || v == cmemberKeyVersion
}

// applyConsumerRecord applies one consumer-group record during replay.
// g.cgRecorded says whether the group record is present.
func (c *Coordinator) applyConsumerRecord(d cdecoded) {
	g := c.getOrCreate(d.group)
	if g.cg == nil {
		g.cg = newCgroup()
	}
	switch {
	case d.member == "" && d.gv == nil:
		g.cg, g.cgRecorded = nil, false
	case d.member == "":
		g.cg.Epoch, g.cg.AssignEpoch, g.cg.Assignor, g.cg.Meta = d.gv.Epoch, d.gv.AssignEpoch, d.gv.Assignor, d.gv.Meta
		g.cgRecorded = true
	case d.mv == nil:
		if m := g.cg.members[d.member]; m != nil {
			if m.InstanceID != "" && g.cg.static[m.InstanceID] == m.ID {
				delete(g.cg.static, m.InstanceID)
			}
			delete(g.cg.members, d.member)
		}
	default:
		m := d.mv.cmember
		m.Assigned, m.Revoking, m.Target = nonNilAssignment(m.Assigned), nonNilAssignment(m.Revoking), nonNilAssignment(m.Target)
		g.cg.members[m.ID] = &m
		if m.InstanceID != "" {
			g.cg.static[m.InstanceID] = m.ID
		}
	}
}

func nonNilAssignment(a assignment) assignment {
	if a == nil {
		return assignment{}
	}
	return a
}

// records returns the records a transaction writes.
func (t *cgTxn) records(group string) []kv {
	var recs []kv
	if t.groupDirty {
		recs = append(recs, kv{Key: cgroupKey(group), Value: t.n.value()})
	}
	ids := make([]string, 0, len(t.dirty)+len(t.gone))
	for id := range t.dirty {
		ids = append(ids, id)
	}
	for id := range t.gone {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if t.gone[id] {
			if t.old != nil && t.old.members[id] != nil {
				recs = append(recs, kv{Key: cmemberKey(group, id)})
			}
			continue
		}
		recs = append(recs, kv{Key: cmemberKey(group, id), Value: t.n.members[id].value()})
	}
	return recs
}

// consumerSnapshot appends the live records of a consumer group.
func (cg *cgroup) snapshot(group string, recs []kv) []kv {
	recs = append(recs, kv{Key: cgroupKey(group), Value: cg.value()})
	for _, m := range cg.sortedMembers() {
		recs = append(recs, kv{Key: cmemberKey(group, m.ID), Value: m.value()})
	}
	return recs
}

// tombstones returns the records that delete a consumer group.
func (cg *cgroup) tombstones(group string) []kv {
	recs := []kv{}
	for _, m := range cg.sortedMembers() {
		recs = append(recs, kv{Key: cmemberKey(group, m.ID)})
	}
	return append(recs, kv{Key: cgroupKey(group)})
}
