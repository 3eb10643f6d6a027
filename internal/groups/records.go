package groups

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/kvlog"
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
type kv = kvlog.Record

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
