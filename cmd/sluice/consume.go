package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newConsumeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "consume -t TOPIC",
		Short: "Print records from a topic",
		Long: `Print records from a topic, from every partition or those given with -p.

-o picks where to start: beginning, end, an offset N, -N (N records before
the end of each partition) or @TIMESTAMP (milliseconds since the epoch or
RFC 3339; the first record at or after it). An offset outside a
partition's range is clamped to it. With -G the group's committed offsets
win and -o applies only to partitions without one; printed records are
committed.

-e exits once every partition (with -G: every assigned partition) is
read up to the end offset it had when consume started, at once when
there is nothing to read.

Format (-f) verbs: %t topic, %p partition, %o offset, %k key, %v value
(%s also), %h headers as k=v,k=v, %T timestamp in milliseconds, %% a
percent sign; escapes \n \t \r \\. --json prints one JSON object per
record instead.`,
		Example: `  sluice consume -t orders -e
  sluice consume -t orders -o -10 -e -f '%p/%o %k=%v %h\n'
  sluice consume -t orders -G billing -c 100 --json`,
		Args: exactArgs(0, "no arguments"),
	}
	cf := addClientFlags(cmd)
	fs := cmd.Flags()
	topic := fs.StringP("topic", "t", "", "topic to read (required)")
	partitions := fs.StringP("partitions", "p", "", "read only these partitions, comma-separated `LIST` (default all; not with -G)")
	offset := fs.StringP("offset", "o", "beginning", "start: beginning, end, N, -N or @TIMESTAMP")
	count := fs.IntP("count", "c", 0, "exit after this many records (0: no limit)")
	exitAtEnd := fs.BoolP("exit", "e", false, "exit at the end of every partition")
	group := fs.StringP("group", "G", "", "consume as a member of this group, committing printed records")
	format := fs.StringP("format", "f", `%p %o %k %v\n`, "output format (see above)")
	jsonOut := fs.BoolP("json", "J", false, "print one JSON object per record")
	groupProto := addGroupProtocolFlags(fs) // group_consumer.go
	shareGroup := fs.String("share-group", "", "consume as a member of this share group (KIP-932), acknowledging each printed record with --ack (consume_share.go)")
	shareAck := fs.String("ack", "accept", "with --share-group, how each printed record is acknowledged: "+shareAckNames())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *topic == "" {
			return usagef("consume: --topic (-t) is required")
		}
		spec, err := parseOffsetSpec(*offset)
		if err != nil {
			return err
		}
		only, err := parsePartitions(*partitions)
		if err != nil {
			return err
		}
		if *group != "" && len(only) > 0 {
			return usagef("consume: -p and -G do not go together: a group assigns partitions to its members")
		}
		if *count < 0 {
			return usagef("consume: --count %d: want 0 or more", *count)
		}
		groupOpts, err := groupProto.opts()
		if err != nil {
			return err
		}
		var out recordWriter
		if *jsonOut {
			out = jsonWriter{}
		} else if out, err = parseFormat(*format); err != nil {
			return err
		}
		var ack kgo.AckStatus
		if *shareGroup != "" {
			if ack, err = parseShareAck(*shareAck, *partitions, *group, *exitAtEnd); err != nil {
				return err
			}
		}
		c, err := cf.connect(cmd.Context())
		if err != nil {
			return err
		}
		defer c.Close()
		con := &consumer{c: c, cmd: cmd, topic: *topic, group: *group, spec: spec,
			count: *count, exit: *exitAtEnd, out: out, groupOpts: groupOpts}
		if *shareGroup != "" {
			return con.runShare(*shareGroup, ack)
		}
		return con.run(only)
	}
	return cmd
}

// parsePartitions parses a -p list such as 0,2,5.
func parsePartitions(list string) ([]int32, error) {
	var ps []int32
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.ParseInt(f, 10, 32)
		if err != nil || p < 0 {
			return nil, usagef("consume: --partitions %q: want partition numbers such as 0,2,5", list)
		}
		ps = append(ps, int32(p))
	}
	return ps, nil
}

// offsetSpec is a parsed -o value.
type offsetSpec struct {
	kind string // "beginning", "end", "at", "relative", "time"
	n    int64  // the offset for "at", the count before the end for "relative", milliseconds for "time"
}

func parseOffsetSpec(s string) (offsetSpec, error) {
	switch s {
	case "beginning", "start", "oldest":
		return offsetSpec{kind: "beginning"}, nil
	case "end", "newest":
		return offsetSpec{kind: "end"}, nil
	}
	if ts, ok := strings.CutPrefix(s, "@"); ok {
		if ms, err := strconv.ParseInt(ts, 10, 64); err == nil && ms >= 0 {
			return offsetSpec{kind: "time", n: ms}, nil
		}
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return offsetSpec{kind: "time", n: t.UnixMilli()}, nil
		}
		return offsetSpec{}, usagef("consume: --offset %q: want @MILLISECONDS or @RFC3339 time", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return offsetSpec{}, usagef("consume: --offset %q: want beginning, end, N, -N or @TIMESTAMP", s)
	}
	if n < 0 {
		return offsetSpec{kind: "relative", n: -n}, nil
	}
	return offsetSpec{kind: "at", n: n}, nil
}

// resetOffset is the spec as a kgo offset, for a group's partitions
// without a committed offset.
func (s offsetSpec) resetOffset() kgo.Offset {
	switch s.kind {
	case "end":
		return kgo.NewOffset().AtEnd()
	case "at":
		return kgo.NewOffset().At(s.n)
	case "relative":
		return kgo.NewOffset().AtEnd().Relative(-s.n)
	case "time":
		return kgo.NewOffset().AfterMilli(s.n)
	}
	return kgo.NewOffset().AtStart()
}

// consumer runs one consume command.
type consumer struct {
	c     *conn
	cmd   *cobra.Command
	topic string
	group string
	spec  offsetSpec
	count int
	exit  bool
	out   recordWriter
	// groupOpts select the group protocol (--group-protocol).
	groupOpts []kgo.Opt
}

// bounds lists each partition's start and end offsets.
func (k *consumer) bounds(ctx context.Context) (starts, ends kadm.ListedOffsets, err error) {
	ctx, cancel := k.c.step(ctx)
	defer cancel()
	if starts, err = k.c.adm.ListStartOffsets(ctx, k.topic); err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, k.c.wrap("consume: start offsets", err)
	}
	if ends, err = k.c.adm.ListEndOffsets(ctx, k.topic); err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, k.c.wrap("consume: end offsets", err)
	}
	return starts, ends, nil
}

// startOffsets resolves the spec to an offset in each partition, clamped
// to the partition's range.
func (k *consumer) startOffsets(ctx context.Context, parts []int32, starts, ends kadm.ListedOffsets) (map[int32]int64, error) {
	var times kadm.ListedOffsets
	if k.spec.kind == "time" {
		sctx, cancel := k.c.step(ctx)
		defer cancel()
		var err error
		if times, err = k.c.adm.ListOffsetsAfterMilli(sctx, k.spec.n, k.topic); err == nil {
			err = times.Error()
		}
		if err != nil {
			return nil, k.c.wrap("consume: offsets for time", err)
		}
	}
	at := make(map[int32]int64, len(parts))
	for _, p := range parts {
		s, _ := starts.Lookup(k.topic, p)
		e, _ := ends.Lookup(k.topic, p)
		var o int64
		switch k.spec.kind {
		case "beginning":
			o = s.Offset
		case "end":
			o = e.Offset
		case "at":
			o = k.spec.n
		case "relative":
			o = e.Offset - k.spec.n
		case "time":
			t, ok := times.Lookup(k.topic, p)
			o = e.Offset
			if ok && t.Offset >= 0 {
				o = t.Offset
			}
		}
		at[p] = min(max(o, s.Offset), e.Offset)
	}
	return at, nil
}

func (k *consumer) run(only []int32) error {
	ctx := k.cmd.Context()
	t, err := topicDetail(k.c, k.cmd, "consume", k.topic)
	if err != nil {
		return err
	}
	parts := only
	if len(parts) == 0 {
		for p := range t.Partitions {
			parts = append(parts, p)
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		if _, ok := t.Partitions[p]; !ok {
			return fmt.Errorf("consume: topic %q has no partition %d (it has %d)", k.topic, p, len(t.Partitions))
		}
	}
	starts, ends, err := k.bounds(ctx)
	if err != nil {
		return err
	}
	at, err := k.startOffsets(ctx, parts, starts, ends)
	if err != nil {
		return err
	}
	if k.group != "" {
		// The group's committed offsets win over -o.
		sctx, cancel := k.c.step(ctx)
		committed, err := k.c.adm.FetchOffsetsForTopics(sctx, k.group, k.topic)
		cancel()
		if err == nil {
			err = committed.Error()
		}
		if errors.Is(err, kerr.GroupIDNotFound) {
			err = nil // a new group (some brokers say so): nothing committed
		}
		if err != nil {
			return k.c.wrap("consume: committed offsets of group "+k.group, err)
		}
		for _, p := range parts {
			if o, ok := committed.Lookup(k.topic, p); ok && o.At >= 0 {
				at[p] = o.At
			}
		}
	}

	tr := &endTracker{remaining: map[int32]int64{}, ends: map[int32]int64{}, group: k.group != ""}
	for _, p := range parts {
		e, _ := ends.Lookup(k.topic, p)
		tr.ends[p] = e.Offset
		if at[p] < e.Offset {
			tr.remaining[p] = e.Offset
		}
	}
	if k.exit && len(tr.remaining) == 0 {
		return nil // nothing to read: every partition starts at its end
	}

	pollCtx, finish := context.WithCancel(ctx)
	defer finish()
	tr.finish = finish
	// Control records (transaction markers) are kept so that -e sees the
	// last offsets of a partition that ends with one; they are not printed.
	opts := []kgo.Opt{kgo.FetchMaxWait(min(k.c.timeout/2, 5*time.Second)), kgo.KeepControlRecords()}
	if k.group != "" {
		opts = append(opts,
			kgo.ConsumerGroup(k.group),
			kgo.ConsumeTopics(k.topic),
			kgo.ConsumeResetOffset(k.spec.resetOffset()),
			kgo.DisableAutoCommit(),
		)
		opts = append(opts, k.groupOpts...)
		opts = append(opts,
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.assign(m[k.topic], true) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.assign(m[k.topic], false) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.assign(m[k.topic], false) }),
		)
	} else {
		offs := make(map[int32]kgo.Offset, len(parts))
		for _, p := range parts {
			offs[p] = kgo.NewOffset().At(at[p])
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{k.topic: offs}))
	}
	cl, err := kgo.NewClient(append(k.c.cl.Opts(), opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return k.poll(ctx, pollCtx, cl, tr)
}

// pollSome polls for as many records as -c still allows after printed,
// until pctx ends, then cancels pctx; timedOut reports whether pctx's
// deadline ended the poll.
func (k *consumer) pollSome(cl *kgo.Client, pctx context.Context, cancel context.CancelFunc, printed int) (fetches kgo.Fetches, timedOut bool) {
	limit := 0
	if k.count > 0 {
		limit = k.count - printed
	}
	fetches = cl.PollRecords(pctx, limit)
	timedOut = errors.Is(pctx.Err(), context.DeadlineExceeded)
	cancel()
	return fetches, timedOut
}

// firstFetchError is the first error of fetches, worded by wrap, that
// is not the poll's context ending.
func firstFetchError(fetches kgo.Fetches, wrap func(topic string, partition int32, err error) error) error {
	var ferr error
	fetches.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && ferr == nil {
			ferr = wrap(t, p, err)
		}
	})
	return ferr
}

// poll prints records until -c, -e or a signal ends it.
func (k *consumer) poll(ctx, pollCtx context.Context, cl *kgo.Client, tr *endTracker) error {
	w := bufio.NewWriter(k.cmd.OutOrStdout())
	defer w.Flush()
	printed := 0
	for {
		if k.exit && tr.done() {
			return nil
		}
		pctx, cancel := pollCtx, context.CancelFunc(func() {})
		if k.exit {
			pctx, cancel = context.WithTimeout(pollCtx, k.c.timeout)
		}
		fetches, timedOut := k.pollSome(cl, pctx, cancel, printed)
		if ctx.Err() != nil {
			return nil // interrupted
		}
		if err := firstFetchError(fetches, func(t string, p int32, err error) error {
			ferr := fmt.Errorf("consume %s/%d: %w", t, p, err)
			if strings.Contains(err.Error(), "does not match calculated crc") {
				ferr = fmt.Errorf("%w (the broker served a corrupt batch: its copy of the partition is damaged; on Sluice, stop the broker and run: sluice repair --data DIR --topic %s --partition %d)", ferr, t, p)
			}
			return ferr
		}); err != nil {
			return err
		}
		var commit []*kgo.Record
		stop := false
		fetches.EachRecord(func(r *kgo.Record) {
			if stop || (k.exit && r.Offset >= tr.endOf(r.Partition)) {
				return // -e: written after consume started
			}
			if r.Attrs.IsControl() {
				commit = append(commit, r) // so the group's position moves past it
				tr.record(r.Partition, r.Offset)
				return
			}
			k.out.write(w, r)
			printed++
			commit = append(commit, r)
			tr.record(r.Partition, r.Offset)
			if k.count > 0 && printed >= k.count {
				stop = true
			}
		})
		if err := w.Flush(); err != nil {
			return fmt.Errorf("consume: %w", err)
		}
		if k.group != "" && len(commit) > 0 {
			sctx, cancel := k.c.step(ctx)
			err := cl.CommitRecords(sctx, commit...)
			cancel()
			if err != nil {
				return k.c.wrap("consume: commit", err)
			}
		}
		if stop {
			return nil
		}
		if timedOut && len(commit) == 0 && !tr.done() {
			return fmt.Errorf("consume: no records within %v (--timeout) while partition(s) %s are not at their end offsets", k.c.timeout, tr.pending())
		}
	}
}

// endTracker follows which partitions -e still has to read.
type endTracker struct {
	group  bool
	finish context.CancelFunc // ends the current poll when done

	mu        sync.Mutex      // guards the fields below; group callbacks run on kgo's goroutines
	remaining map[int32]int64 // partition -> end offset still to reach
	ends      map[int32]int64 // partition -> end offset when consume started
	assigned  map[int32]bool  // the group's assignment; nil until the first
}

func (t *endTracker) endOf(p int32) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.ends[p]; ok {
		return e
	}
	return 1<<63 - 1
}

func (t *endTracker) record(p int32, offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if end, ok := t.remaining[p]; ok && offset+1 >= end {
		delete(t.remaining, p)
	}
	t.checkLocked()
}

func (t *endTracker) assign(ps []int32, add bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.assigned == nil {
		t.assigned = map[int32]bool{}
	}
	for _, p := range ps {
		if add {
			t.assigned[p] = true
		} else {
			delete(t.assigned, p)
		}
	}
	t.checkLocked()
}

func (t *endTracker) checkLocked() {
	if t.doneLocked() && t.finish != nil {
		t.finish()
	}
}

func (t *endTracker) done() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.doneLocked()
}

func (t *endTracker) doneLocked() bool {
	if len(t.remaining) == 0 {
		return true
	}
	if !t.group || t.assigned == nil || len(t.assigned) == 0 {
		return false
	}
	for p := range t.assigned {
		if _, ok := t.remaining[p]; ok {
			return false
		}
	}
	return true
}

func (t *endTracker) pending() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ps []string
	for p := range t.remaining {
		ps = append(ps, strconv.Itoa(int(p)))
	}
	sort.Strings(ps)
	return strings.Join(ps, ",")
}

// recordWriter prints one record.
type recordWriter interface {
	write(w *bufio.Writer, r *kgo.Record)
}

// formatWriter prints records with a -f format.
type formatWriter []formatPiece

// formatPiece is literal text, or a verb when verb is not 0.
type formatPiece struct {
	lit  string
	verb byte
}

func parseFormat(f string) (formatWriter, error) {
	var pieces formatWriter
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			pieces = append(pieces, formatPiece{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c == '\\' && i+1 < len(f):
			i++
			switch f[i] {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case 'r':
				lit.WriteByte('\r')
			case '\\':
				lit.WriteByte('\\')
			default:
				return nil, usagef(`consume: --format %q: unknown escape \%c (want \n \t \r or \\)`, f, f[i])
			}
		case c == '%' && i+1 < len(f):
			i++
			switch v := f[i]; v {
			case '%':
				lit.WriteByte('%')
			case 't', 'p', 'o', 'k', 'v', 's', 'h', 'T':
				flush()
				pieces = append(pieces, formatPiece{verb: v})
			default:
				return nil, usagef("consume: --format %q: unknown verb %%%c (want %%t %%p %%o %%k %%v %%h %%T or %%%%)", f, v)
			}
		case c == '%' || c == '\\':
			return nil, usagef("consume: --format %q: a lone %c at the end", f, c)
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return pieces, nil
}

func (f formatWriter) write(w *bufio.Writer, r *kgo.Record) {
	for _, p := range f {
		switch p.verb {
		case 0:
			w.WriteString(p.lit)
		case 't':
			w.WriteString(r.Topic)
		case 'p':
			w.WriteString(strconv.Itoa(int(r.Partition)))
		case 'o':
			w.WriteString(strconv.FormatInt(r.Offset, 10))
		case 'k':
			w.Write(r.Key)
		case 'v', 's':
			w.Write(r.Value)
		case 'T':
			w.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
		case 'h':
			for j, h := range r.Headers {
				if j > 0 {
					w.WriteByte(',')
				}
				w.WriteString(h.Key)
				w.WriteByte('=')
				w.Write(h.Value)
			}
		}
	}
}

// jsonRecord is the --json output of one record. Key and value are
// strings (invalid UTF-8 becomes U+FFFD); a record without a key has
// "key": null.
type jsonRecord struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"`
	Key       *string      `json:"key"`
	Value     string       `json:"value"`
	Headers   []jsonHeader `json:"headers"`
}

type jsonHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type jsonWriter struct{}

func (jsonWriter) write(w *bufio.Writer, r *kgo.Record) {
	jr := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Timestamp: r.Timestamp.UnixMilli(), Value: string(r.Value), Headers: []jsonHeader{}}
	if r.Key != nil {
		k := string(r.Key)
		jr.Key = &k
	}
	for _, h := range r.Headers {
		jr.Headers = append(jr.Headers, jsonHeader{Key: h.Key, Value: string(h.Value)})
	}
	b, _ := json.Marshal(jr) // cannot fail: strings and numbers only
	w.Write(b)
	w.WriteByte('\n')
}
