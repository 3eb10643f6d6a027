package broker

// Fetch v4-18.
//
// Behaviour:
//   - Reads never go past a partition's high watermark (its durable
//     offset under the default fsync policy). An offset below the log
//     start offset or past the log end offset gets OFFSET_OUT_OF_RANGE;
//     one between the high watermark and the log end offset gets no
//     records.
//   - Long poll: when fewer than MinBytes are available, the request
//     waits up to MaxWaitMillis, woken by the acceptors as high
//     watermarks move (and at once when the broker closes).
//   - PartitionMaxBytes and the response MaxBytes bound the record bytes,
//     except that the first partition with data always gets at least one
//     whole batch (KIP-74). Batches are sent whole, exactly as stored.
//   - Record bytes never pass through user space when the connection is
//     TCP and the segment an OS file: the response is encoded with kmsg
//     around placeholders, and each partition's records are streamed from
//     the segment file with sendfile (storage.Slice.WriteTo) between the
//     encoded pieces (see fetchReply).
//   - Sessions (KIP-227) are not kept: every response has session id 0,
//     which tells clients to send full fetch requests; a request naming a
//     session gets FETCH_SESSION_ID_NOT_FOUND. ForgottenTopics is
//     ignored.
//   - IsolationLevel 1 (read_committed) reads stop at the last stable
//     offset (the first offset of the oldest open transaction, else the
//     high watermark) and the response lists the aborted transactions
//     (producer id, first offset) that overlap the range read, so the
//     client drops their records; read_uncommitted reads up to the high
//     watermark. Control batches are returned as stored (clients skip
//     them).
//   - v13+ name topics by id; an unknown id gets UNKNOWN_TOPIC_ID.
//   - v14 (KIP-405): nothing is tiered, so OFFSET_MOVED_TO_TIERED_STORAGE
//     never occurs. v15 names a replica in ReplicaState (KIP-903); v17's
//     ReplicaDirectoryId and v18's replica HighWatermark (KIP-1166) are
//     accepted and ignored, as Sluice has no followers.
//   - v16+ (KIP-951): the CurrentLeader and NodeEndpoints fields are sent
//     only with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, which this
//     broker, the leader of every partition, never answers; they stay
//     empty.
//   - Needs READ on each topic (else TOPIC_AUTHORIZATION_FAILED on its
//     partitions); a fetch from a replica id needs CLUSTER_ACTION.
//   - Over TLS, record bytes are copied through a buffer (sendfile
//     cannot write into crypto/tls).
//   - Leader epochs are not checked (the leader epoch is always 0).

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/storage"
)

func init() { register(kmsg.Fetch.Int16(), 4, 18, handleFetch) }

// fetchPart is one requested partition.
type fetchPart struct {
	ti, pi   int // index in the response
	p        *partition.Partition
	offset   int64
	maxBytes int32
	code     int16
	slice    storage.Slice
	limit    int64 // the offset the read stopped before (HW or LSO)
}

func handleFetch(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	b := r.b
	if req.Version >= 7 {
		switch {
		case req.SessionID != 0:
			resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
			return resp, nil
		case req.SessionEpoch > 0:
			resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
			return resp, nil
		}
	}

	follower := req.ReplicaID >= 0 || (req.Version >= 15 && req.ReplicaState.ID >= 0)
	if follower && !r.allowedCluster(opClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	var parts []fetchPart
	for ti, rt := range req.Topics {
		var t *topic
		st := kmsg.FetchResponseTopic{Topic: rt.Topic, TopicID: rt.TopicID}
		missing := kerr.UnknownTopicOrPartition.Code
		if req.Version >= 13 {
			t = b.lookupID(rt.TopicID)
			missing = kerr.UnknownTopicID.Code
		} else {
			t = b.lookup(rt.Topic)
		}
		denied := t != nil && !follower && !r.allowed(opRead, resTopic, t.name)
		if t == nil && req.Version < 13 && !r.allowed(opRead, resTopic, rt.Topic) {
			denied = true
		}
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
			fp := fetchPart{ti: ti, pi: pi, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes}
			switch {
			case denied:
				fp.code = kerr.TopicAuthorizationFailed.Code
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				fp.code = missing
			default:
				fp.p = t.parts[rp.Partition]
			}
			parts = append(parts, fp)
		}
		resp.Topics = append(resp.Topics, st)
	}

	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	var timer *time.Timer
	var w *partition.Waiter
	for {
		total, failed := readParts(parts, req.MaxBytes, req.IsolationLevel == 1)
		if total >= int(req.MinBytes) || failed || maxWait <= 0 || r.ctx.Err() != nil {
			break
		}
		if w == nil {
			// Registered before the next read: an advance between that
			// read and the wait below is kept in the waiter's signal.
			w = partition.NewWaiter()
			defer w.Stop()
			for i := range parts {
				w.Watch(parts[i].p)
			}
			timer = time.NewTimer(maxWait)
			defer timer.Stop()
			continue
		}
		waitStart := time.Now()
		select {
		case <-w.C():
			r.waited += time.Since(waitStart)
			continue
		case <-r.ctx.Done():
			r.waited += time.Since(waitStart)
			continue
		case <-timer.C:
		}
		r.waited += time.Since(waitStart)
		readParts(parts, req.MaxBytes, req.IsolationLevel == 1)
		break
	}

	fr := &fetchReply{FetchResponse: resp}
	for _, fp := range parts {
		sp := &resp.Topics[fp.ti].Partitions[fp.pi]
		sp.ErrorCode = fp.code
		if fp.p != nil {
			hw := fp.p.HighWatermark()
			sp.HighWatermark = hw
			sp.LastStableOffset = fp.p.LastStableOffsetAt(hw)
			sp.LogStartOffset = fp.p.StartOffset()
			if req.IsolationLevel == 1 && fp.slice.Len() > 0 {
				sp.AbortedTransactions = fp.p.AbortedIn(fp.offset, fp.limit)
			}
		}
		if fp.slice.Len() > 0 {
			first, next := fp.slice.Offsets()
			n := next - max(first, fp.offset)
			fp.p.Traffic().Out(n, fp.slice.Len())
			b.traffic.Out(n, fp.slice.Len())
			fr.add(sp, fp.slice)
		} else {
			// An empty record set is a zero-length array, never null:
			// librdkafka rejects a null one ("invalid MessageSetSize -1").
			sp.RecordBatches = []byte{}
		}
	}
	return fr, nil
}

// readParts reads every partition's records for this round. It returns
// the record bytes found and whether a partition has an error.
func readParts(parts []fetchPart, maxBytes int32, committed bool) (total int, failed bool) {
	budget := int64(maxBytes)
	if budget <= 0 {
		budget = 1<<31 - 1
	}
	for i := range parts {
		fp := &parts[i]
		fp.slice = storage.Slice{}
		if fp.p == nil {
			failed = true
			continue
		}
		fp.code = 0
		if total > 0 && int64(total) >= budget {
			continue
		}
		limit := min(int64(fp.maxBytes), budget-int64(total))
		if fp.maxBytes <= 0 {
			continue
		}
		s, lim, err := fp.p.Read(fp.offset, committed, int(max(limit, 1)))
		fp.limit = lim
		switch {
		case err == nil:
			fp.slice = s
			total += s.Len()
		case errors.Is(err, storage.ErrOffsetOutOfRange):
			fp.code = kerr.OffsetOutOfRange.Code
			failed = true
		case errors.Is(err, storage.ErrClosed):
			fp.code = kerr.NotLeaderForPartition.Code
			failed = true
		default:
			fp.code = kerr.KafkaStorageError.Code
			failed = true
		}
	}
	return total, failed
}

// fetchReply is a Fetch response whose record bytes are streamed from
// segment files. The embedded response is encoded by kmsg with a unique
// placeholder in each RecordBatches field that has records; write
// replaces every placeholder (and its length prefix) with the real length
// and the slice's bytes.
type fetchReply struct {
	*kmsg.FetchResponse
	slices []storage.Slice // in encoding order, one per placeholder
}

// placeholderSeed makes placeholders unguessable, so that no topic name
// or other field can be mistaken for one.
var placeholderSeed = func() (s [16]byte) {
	if _, err := rand.Read(s[:]); err != nil {
		panic("broker: crypto/rand failed: " + err.Error())
	}
	return s
}()

const placeholderLen = 20

func placeholder(i int) []byte {
	p := make([]byte, placeholderLen)
	copy(p, placeholderSeed[:])
	binary.BigEndian.PutUint32(p[16:], uint32(i))
	return p
}

func (f *fetchReply) add(sp *kmsg.FetchResponseTopicPartition, s storage.Slice) {
	sp.RecordBatches = placeholder(len(f.slices))
	f.slices = append(f.slices, s)
}

// write writes the response frame for correlation id corr.
func (f *fetchReply) write(c *conn, corr int32) error {
	flexible := f.IsFlexible()
	body := make([]byte, 0, 256)
	if flexible {
		body = append(body, 0) // response header v1: no tagged fields
	}
	body = f.AppendTo(body)

	// Find each placeholder and its length prefix.
	type cut struct {
		start, end int // bytes of body replaced: length prefix + placeholder
		slice      storage.Slice
	}
	cuts := make([]cut, 0, len(f.slices))
	size := 4 + len(body) // correlation id + header tags + body
	from := 0
	for i, s := range f.slices {
		at := bytes.Index(body[from:], placeholder(i))
		if at < 0 {
			return fmt.Errorf("fetch response: placeholder %d not found", i)
		}
		at += from
		prefix := 4
		if flexible {
			prefix = 1 // uvarint(placeholderLen+1)
		}
		cuts = append(cuts, cut{start: at - prefix, end: at + placeholderLen, slice: s})
		size += -prefix - placeholderLen + lengthPrefixLen(s.Len(), flexible) + s.Len()
		from = at + placeholderLen
	}
	if size > 1<<31-1 {
		return fmt.Errorf("fetch response of %d bytes is too large", size)
	}

	w := c.w
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[0:], uint32(size))
	binary.BigEndian.PutUint32(hdr[4:], uint32(corr))
	w.Write(hdr[:])
	prev := 0
	var sent int64
	for _, ct := range cuts {
		w.Write(body[prev:ct.start])
		w.Write(appendLengthPrefix(hdr[:0], ct.slice.Len(), flexible))
		if err := w.Flush(); err != nil {
			return fmt.Errorf("write fetch response: %w", err)
		}
		n, err := ct.slice.WriteTo(c.nc)
		sent += n
		if err != nil {
			return fmt.Errorf("write fetch records: %w", err)
		}
		prev = ct.end
	}
	w.Write(body[prev:])
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write fetch response: %w", err)
	}
	c.b.metrics.fetchBytes.Add(float64(sent))
	return nil
}

func lengthPrefixLen(n int, flexible bool) int {
	if !flexible {
		return 4
	}
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutUvarint(tmp[:], uint64(n)+1)
}

func appendLengthPrefix(dst []byte, n int, flexible bool) []byte {
	if !flexible {
		return binary.BigEndian.AppendUint32(dst, uint32(n))
	}
	return binary.AppendUvarint(dst, uint64(n)+1)
}
