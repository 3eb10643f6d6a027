package console

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/schemaregistry"
)

// Bounds of the message browser: a page holds at most maxRecords
// records and about maxFetchBytes of record batches; each key, value
// and header value is cut to maxValueBytes (its full size is reported).
const (
	defaultRecords = 20
	maxRecords     = 200
	maxFetchBytes  = 1 << 20
	maxValueBytes  = 16 << 10
	readTimeout    = 5 * time.Second
	moreWait       = 500 * time.Millisecond // for more records once some came
)

// record is one record as the browser shows it. Byte fields are base64
// in JSON; the page decodes them and shows text, JSON or hex.
type record struct {
	Offset    int64    `json:"offset"`
	Timestamp int64    `json:"timestamp"` // unix milliseconds
	Key       []byte   `json:"key"`       // null for a null key
	KeySize   int      `json:"key_size"`
	Value     []byte   `json:"value"` // null for a null value (a tombstone)
	ValueSize int      `json:"value_size"`
	Headers   []header `json:"headers"`
	Truncated bool     `json:"truncated,omitempty"` // key, value or a header value was cut
	// KeyDecoded and ValueDecoded: the key and value decoded with their
	// schema, when Config.Schemas is set and they are in the registry's
	// wire format (schemas.go).
	KeyDecoded   *schemaregistry.Decoded `json:"key_decoded,omitempty"`
	ValueDecoded *schemaregistry.Decoded `json:"value_decoded,omitempty"`
}

type header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// recordsPage is GET .../records.
type recordsPage struct {
	Topic         string   `json:"topic"`
	Partition     int32    `json:"partition"`
	StartOffset   int64    `json:"start_offset"`
	HighWatermark int64    `json:"high_watermark"`
	From          int64    `json:"from"`        // first offset asked for
	NextOffset    int64    `json:"next_offset"` // where the next page starts
	Limit         int64    `json:"limit"`
	Records       []record `json:"records"`
}

func contextFor(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}

func (s *Server) apiRecords(w http.ResponseWriter, r *http.Request) {
	page, err := s.readRecords(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) readRecords(r *http.Request) (*recordsPage, error) {
	t, err := s.topic(r, kmsg.ACLOperationRead)
	if err != nil {
		return nil, err
	}
	ps := r.PathValue("partition")
	pn, err := strconv.ParseInt(ps, 10, 32)
	if err != nil {
		return nil, badRequest("partition %q: want an integer", ps)
	}
	if pn < 0 || int(pn) >= len(t.Partitions) {
		return nil, notFound("partition %d of %q does not exist (it has %d)", pn, t.Name, len(t.Partitions))
	}
	p := t.Partitions[pn]
	limit, err := intParam(r, "limit", defaultRecords, 1, maxRecords)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	if q.Has("offset") && q.Has("timestamp") {
		return nil, badRequest("give offset or timestamp, not both")
	}
	page := &recordsPage{Topic: t.Name, Partition: int32(pn), StartOffset: p.StartOffset, HighWatermark: p.HighWatermark, Limit: limit, Records: []record{}}
	ctx, cancel := contextFor(r, readTimeout)
	defer cancel()
	switch {
	case q.Has("offset"):
		off, err := intParam(r, "offset", 0, 0, 1<<62)
		if err != nil {
			return nil, err
		}
		page.From = min(max(off, p.StartOffset), p.HighWatermark)
	case q.Has("timestamp"):
		ts, err := intParam(r, "timestamp", 0, 0, 1<<62)
		if err != nil {
			return nil, err
		}
		listed, err := s.adm.ListOffsetsAfterMilli(ctx, ts, t.Name)
		if err != nil {
			return nil, err
		}
		lo, ok := listed.Lookup(t.Name, int32(pn))
		if !ok {
			return nil, errors.New("ListOffsets did not answer for the partition")
		}
		if lo.Err != nil {
			return nil, lo.Err
		}
		page.From = min(max(lo.Offset, p.StartOffset), p.HighWatermark)
	default:
		page.From = max(p.HighWatermark-limit, p.StartOffset)
	}
	page.NextOffset = page.From
	if page.From >= p.HighWatermark {
		return page, nil
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return nil, &apiError{http.StatusServiceUnavailable, "too many message-browser reads at once; try again"}
	}
	return page, s.consume(ctx, page, p.HighWatermark, s.decoder(r))
}

// consume reads page.Limit records from page.From with a Kafka consumer
// of the partition, stopping at hw (the high watermark seen when the
// request came).
func (s *Server) consume(ctx context.Context, page *recordsPage, hw int64, decode func([]byte) *schemaregistry.Decoded) error {
	opts := append(append([]kgo.Opt(nil), s.clOpt...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{page.Topic: {page.Partition: kgo.NewOffset().At(page.From)}}),
		kgo.FetchMaxBytes(maxFetchBytes),
		kgo.FetchMaxPartitionBytes(maxFetchBytes),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for int64(len(page.Records)) < page.Limit && page.NextOffset < hw {
		// Once records came, wait briefly for more: offsets that hold no
		// record a consumer sees (control records) never arrive, and the
		// page is complete without them.
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if len(page.Records) > 0 {
			pctx, cancel = context.WithTimeout(ctx, moreWait)
		}
		fs := cl.PollRecords(pctx, int(page.Limit)-len(page.Records))
		expired := pctx.Err() != nil
		cancel()
		if expired {
			break // a partial page is still a page
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return fe.Err
			}
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if int64(len(page.Records)) >= page.Limit || rec.Offset >= hw {
				return
			}
			out := toRecord(rec)
			if decode != nil {
				out.KeyDecoded, out.ValueDecoded = decode(rec.Key), decode(rec.Value)
			}
			page.Records = append(page.Records, out)
			page.NextOffset = rec.Offset + 1
		})
	}
	return nil
}

func toRecord(rec *kgo.Record) record {
	out := record{Offset: rec.Offset, Timestamp: rec.Timestamp.UnixMilli(), KeySize: len(rec.Key), ValueSize: len(rec.Value), Headers: []header{}}
	cut := func(b []byte) []byte {
		if len(b) > maxValueBytes {
			out.Truncated = true
			return b[:maxValueBytes]
		}
		return b
	}
	out.Key, out.Value = cut(rec.Key), cut(rec.Value)
	for _, h := range rec.Headers {
		out.Headers = append(out.Headers, header{Key: h.Key, Value: cut(h.Value)})
	}
	return out
}
