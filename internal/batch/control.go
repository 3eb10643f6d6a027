package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ControlType is the type in a control record's key (KIP-98).
type ControlType int16

// Transaction markers.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	}
	return fmt.Sprintf("control(%d)", int16(t))
}

// Marker is a transaction marker: the one control record of a control
// batch that ends a producer's transaction on a partition.
type Marker struct {
	Type             ControlType
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Timestamp        int64 // milliseconds
}

// ErrNotControl reports a batch that is not a well-formed control batch.
var ErrNotControl = errors.New("batch: not a transaction marker batch")

// AppendMarker appends a control batch holding m (base offset baseOffset,
// attributes control|transactional, base sequence -1, one record at
// offset delta 0 whose key is version 0 and the type and whose value is
// version 0 and the coordinator epoch), as the transaction coordinator
// writes to each partition of an ending transaction.
func AppendMarker(dst []byte, baseOffset int64, partitionLeaderEpoch int32, m Marker) []byte {
	key := binary.BigEndian.AppendUint16(make([]byte, 0, 4), 0)
	key = binary.BigEndian.AppendUint16(key, uint16(m.Type))
	val := binary.BigEndian.AppendUint16(make([]byte, 0, 6), 0)
	val = binary.BigEndian.AppendUint32(val, uint32(m.CoordinatorEpoch))
	p := Params{
		BaseOffset:           baseOffset,
		PartitionLeaderEpoch: partitionLeaderEpoch,
		Transactional:        true,
		Control:              true,
		ProducerID:           m.ProducerID,
		ProducerEpoch:        m.ProducerEpoch,
		BaseSequence:         -1,
	}
	rec := []Record{{Timestamp: m.Timestamp, Key: key, Value: val}}
	out, err := Append(dst, &p, rec)
	if err != nil {
		panic("batch: encoding a marker: " + err.Error()) // uncompressed, one record: cannot fail
	}
	return out
}

// ControlKey decodes a control record's key: version (int16, 0) and type.
func ControlKey(key []byte) (ControlType, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("%w: control key of %d bytes", ErrNotControl, len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != 0 {
		return 0, fmt.Errorf("%w: control key version %d", ErrNotControl, v)
	}
	return ControlType(binary.BigEndian.Uint16(key[2:])), nil
}

// ParseMarker decodes the transaction marker of the control batch raw
// (header h, as Validate returns it). It fails unless the batch has the
// control bit and exactly one record whose key is an ABORT or COMMIT
// control key (version 0) and whose value is version 0 with a
// coordinator epoch.
func ParseMarker(h *Header, raw []byte) (Marker, error) {
	m := Marker{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch}
	if !h.Control() {
		return m, fmt.Errorf("%w: control bit not set", ErrNotControl)
	}
	if h.NumRecords != 1 {
		return m, fmt.Errorf("%w: %d records", ErrNotControl, h.NumRecords)
	}
	err := Records(h, raw, func(r *Record) error {
		t, err := ControlKey(r.Key)
		if err != nil {
			return err
		}
		if t != ControlAbort && t != ControlCommit {
			return fmt.Errorf("%w: control type %d", ErrNotControl, t)
		}
		if len(r.Value) < 6 || binary.BigEndian.Uint16(r.Value) != 0 {
			return fmt.Errorf("%w: marker value of %d bytes", ErrNotControl, len(r.Value))
		}
		m.Type = t
		m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
		m.Timestamp = r.Timestamp
		return nil
	})
	return m, err
}
