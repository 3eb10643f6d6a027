package groups

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"sluice/internal/batch"
)

// The internal log uses the record formats of Kafka's __consumer_offsets
// topic (kmsg.OffsetCommitKey/Value and kmsg.GroupMetadataKey/Value): a
// key whose leading int16 version is 0 or 1 names a committed offset, 2
// names a group's metadata; a record with a null value is a tombstone
// that deletes its key.
const (
	offsetKeyVersion   = 1
	groupKeyVersion    = 2
	offsetValueVersion = 3 // carries the leader epoch
	groupValueVersion  = 3 // carries static instance ids
)

// kv is one record of the internal log. A nil Value is a tombstone.
type kv struct {
	Key   []byte
	Value []byte
}

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// errBadRecord marks an internal-log record that does not decode.
var errBadRecord = errors.New("groups: undecodable internal log record")

// decoded is one decoded internal-log record: exactly one of offset or
// group is set, and value is nil for a tombstone.
type decoded struct {
	offset      *kmsg.OffsetCommitKey
	offsetValue *kmsg.OffsetCommitValue
	group       *kmsg.GroupMetadataKey
	groupValue  *kmsg.GroupMetadataValue
}

func decodeRecord(r kv) (decoded, error) {
	var d decoded
	if len(r.Key) < 2 {
		return d, fmt.Errorf("%w: key of %d bytes", errBadRecord, len(r.Key))
	}
	switch v := int16(binary.BigEndian.Uint16(r.Key)); v {
	case 0, 1:
		d.offset = new(kmsg.OffsetCommitKey)
		if err := d.offset.ReadFrom(r.Key); err != nil {
			return d, fmt.Errorf("%w: offset key: %w", errBadRecord, err)
		}
		if r.Value != nil {
			d.offsetValue = new(kmsg.OffsetCommitValue)
			if err := d.offsetValue.ReadFrom(r.Value); err != nil {
				return d, fmt.Errorf("%w: offset value: %w", errBadRecord, err)
			}
		}
	case 2:
		d.group = new(kmsg.GroupMetadataKey)
		if err := d.group.ReadFrom(r.Key); err != nil {
			return d, fmt.Errorf("%w: group key: %w", errBadRecord, err)
		}
		if r.Value != nil {
			d.groupValue = new(kmsg.GroupMetadataValue)
			if err := d.groupValue.ReadFrom(r.Value); err != nil {
				return d, fmt.Errorf("%w: group value: %w", errBadRecord, err)
			}
		}
	default:
		return d, fmt.Errorf("%w: key version %d", errBadRecord, v)
	}
	return d, nil
}

// encodeBatch appends one uncompressed RecordBatch v2 holding recs, with
// base offset 0 (the acceptor assigns the real one) and timestamp ts
// (milliseconds), to dst.
func encodeBatch(dst []byte, recs []kv, ts int64) []byte {
	var body []byte
	for i, r := range recs {
		rec := kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		enc := rec.AppendTo(nil) // Length 0 encodes as one varint byte
		body = binary.AppendVarint(body, int64(len(enc)-1))
		body = append(body, enc[1:]...)
	}
	b := kmsg.RecordBatch{
		Length:          int32(batch.HeaderSize - batch.LengthOffset + len(body)),
		Magic:           2,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  ts,
		MaxTimestamp:    ts,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(len(recs)),
		Records:         body,
	}
	start := len(dst)
	dst = b.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start+17:], batch.Checksum(dst[start:]))
	return dst
}

// decodeBatches calls fn for every record of the whole, CRC-checked
// batches in b, with the record's offset.
func decodeBatches(b []byte, fn func(offset int64, r kv) error) error {
	_, err := batch.Split(b, func(h batch.Header, raw []byte) error {
		if h.Compression() != 0 {
			return fmt.Errorf("%w: compressed batch at offset %d", errBadRecord, h.BaseOffset)
		}
		if h.Control() {
			return nil
		}
		rest := raw[batch.HeaderSize:]
		for i := int32(0); i < h.NumRecords; i++ {
			n, w := binary.Varint(rest)
			if w <= 0 || n < 0 || int64(len(rest)-w) < n {
				return fmt.Errorf("%w: record %d of batch at offset %d is cut short", errBadRecord, i, h.BaseOffset)
			}
			var rec kmsg.Record
			if err := rec.ReadFrom(rest[:w+int(n)]); err != nil {
				return fmt.Errorf("%w: record %d of batch at offset %d: %w", errBadRecord, i, h.BaseOffset, err)
			}
			rest = rest[w+int(n):]
			if err := fn(h.BaseOffset+int64(rec.OffsetDelta), kv{Key: rec.Key, Value: rec.Value}); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// setBaseOffset sets the base offset of the single batch in b.
func setBaseOffset(b []byte, off int64) { batch.SetBaseOffset(b, off) }
