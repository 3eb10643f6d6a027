package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newProduceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "produce -t TOPIC",
		Short: "Write records read from stdin or a file, one per line (or per delimiter)",
		Long: `Write records read from stdin or a file: one record per line, or per
--delimiter. With -K each record is KEY<DELIM>VALUE (a record without the
delimiter has no key). At the end a delivery summary goes to stderr:
records and bytes written, and the offsets written in each partition.
The topic must exist.`,
		Example: `  printf 'k1:hello\nk2:world\n' | sluice produce -t orders -K :
  sluice produce -t orders -f records.txt -H source=import -z zstd
  sluice produce -t orders -D '\t' --acks 1 -p 0`,
		Args: exactArgs(0, "no arguments (records come from stdin or --file)"),
	}
	cf := addClientFlags(cmd)
	fs := cmd.Flags()
	topic := fs.StringP("topic", "t", "", "topic to write to (required)")
	keyDelim := fs.StringP("key-delimiter", "K", "", "split each record into KEY<DELIM>VALUE at the first DELIM")
	headers := fs.StringArrayP("header", "H", nil, "header key=value added to every record (repeatable)")
	partition := fs.Int32P("partition", "p", -1, "partition to write to (-1: by key hash, or spread when there is no key)")
	acks := fs.String("acks", "all", "acknowledgement: all (fsynced on Sluice), 1 (leader) or 0 (none)")
	compression := fs.StringP("compression", "z", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	file := fs.StringP("file", "f", "-", "read records from this file (-: stdin)")
	delim := fs.StringP("delimiter", "D", `\n`, `record delimiter; escapes \n \t \r \0 \\ are understood`)
	maxBytes := fs.Int32("max-message-bytes", 0, "largest record batch the client sends (0: the topic's max.message.bytes)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *topic == "" {
			return usagef("produce: --topic (-t) is required")
		}
		sep, err := unescape(*delim)
		if err != nil || sep == "" {
			return usagef("produce: --delimiter %q: want a non-empty delimiter (%v)", *delim, err)
		}
		hdrs, err := parseHeaders(*headers)
		if err != nil {
			return err
		}
		opts, err := produceOpts(*topic, *partition, *acks, *compression)
		if err != nil {
			return err
		}
		in := cmd.InOrStdin()
		if *file != "-" {
			f, err := os.Open(*file)
			if err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			defer f.Close()
			in = f
		}
		if *maxBytes < 0 {
			return usagef("produce: --max-message-bytes %d: want a positive size, or 0 for the topic's max.message.bytes", *maxBytes)
		}
		admin, err := cf.connect(cmd.Context())
		if err != nil {
			return err
		}
		t, err := topicDetail(admin, cmd, "produce", *topic)
		if err == nil && *maxBytes == 0 {
			*maxBytes, err = topicMaxMessageBytes(admin, cmd, *topic)
		}
		admin.Close()
		if err != nil {
			return err
		}
		c, err := cf.connect(cmd.Context(), append(opts, kgo.ProducerBatchMaxBytes(*maxBytes))...)
		if err != nil {
			return err
		}
		defer c.Close()
		if *partition >= 0 {
			if _, ok := t.Partitions[*partition]; !ok {
				return fmt.Errorf("produce: topic %q has no partition %d (it has %d)", *topic, *partition, len(t.Partitions))
			}
		}
		s := &deliveries{parts: map[int32]*span{}}
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		sc.Split(splitOn([]byte(sep)))
		for sc.Scan() {
			line := sc.Bytes()
			r := &kgo.Record{Value: bytes.Clone(line), Partition: *partition, Headers: hdrs}
			if *keyDelim != "" {
				if k, v, ok := bytes.Cut(line, []byte(*keyDelim)); ok {
					r.Key, r.Value = bytes.Clone(k), bytes.Clone(v)
				}
			}
			s.add()
			c.cl.Produce(cmd.Context(), r, s.done)
		}
		if err := sc.Err(); err != nil {
			c.cl.Flush(context.WithoutCancel(cmd.Context()))
			return fmt.Errorf("produce: reading input: %w", err)
		}
		// Flush ends when every record is acknowledged or has failed; each
		// record's delivery is bounded by --timeout.
		if err := c.cl.Flush(cmd.Context()); err != nil {
			return c.wrap("produce", err)
		}
		summary, err := s.summary(*topic, *acks == "0")
		fmt.Fprint(cmd.ErrOrStderr(), summary)
		if err != nil {
			return c.wrap("produce", err)
		}
		return nil
	}
	return cmd
}

// topicMaxMessageBytes is the topic's max.message.bytes, the largest
// record batch the broker accepts for it.
func topicMaxMessageBytes(c *conn, cmd *cobra.Command, topic string) (int32, error) {
	ctx, cancel := c.step(cmd.Context())
	defer cancel()
	rcs, err := c.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, c.wrap("produce: describe "+topic+" configs", err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return 0, c.wrap("produce: describe "+topic+" configs", err)
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == "max.message.bytes" && cfg.Value != nil {
			n, err := strconv.ParseInt(*cfg.Value, 10, 32)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("produce: topic %q has max.message.bytes %q: give --max-message-bytes", topic, *cfg.Value)
			}
			return int32(n), nil
		}
	}
	return 1048588, nil // Kafka's default, for a broker that does not say
}

// produceOpts turns the produce flags into client options.
func produceOpts(topic string, partition int32, acks, compression string) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic)}
	if partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	} else if partition != -1 {
		return nil, usagef("produce: --partition %d: want -1 or a partition number", partition)
	}
	switch acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, usagef("produce: --acks %q: want all, 1 or 0", acks)
	}
	var codec kgo.CompressionCodec
	switch compression {
	case "none", "":
		codec = kgo.NoCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	default:
		return nil, usagef("produce: --compression %q: want none, gzip, snappy, lz4 or zstd", compression)
	}
	return append(opts, kgo.ProducerBatchCompression(codec)), nil
}

func parseHeaders(kvs []string) ([]kgo.RecordHeader, error) {
	var hdrs []kgo.RecordHeader
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("produce: --header %q: want key=value", kv)
		}
		hdrs = append(hdrs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return hdrs, nil
}

// splitOn is a bufio.SplitFunc that cuts at sep; a final piece without
// sep is a record too, but an empty one is not.
func splitOn(sep []byte) bufio.SplitFunc {
	return func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.Index(data, sep); i >= 0 {
			return i + len(sep), data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	}
}

// span is the range of offsets written to one partition.
type span struct{ first, last, n int64 }

// deliveries counts the produce callbacks' results.
type deliveries struct {
	wg sync.WaitGroup

	mu       sync.Mutex // guards the fields below, written by produce callbacks
	ok       int64
	bytes    int64
	failed   int64
	firstErr error
	parts    map[int32]*span
}

func (d *deliveries) add() { d.wg.Add(1) }

func (d *deliveries) done(r *kgo.Record, err error) {
	defer d.wg.Done()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.failed++
		if d.firstErr == nil {
			d.firstErr = err
		}
		return
	}
	d.ok++
	d.bytes += int64(len(r.Key) + len(r.Value))
	s := d.parts[r.Partition]
	if s == nil {
		s = &span{first: r.Offset, last: r.Offset}
		d.parts[r.Partition] = s
	}
	s.first, s.last, s.n = min(s.first, r.Offset), max(s.last, r.Offset), s.n+1
}

// summary waits for every callback and describes what was delivered.
func (d *deliveries) summary(topic string, noAcks bool) (string, error) {
	d.wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "produced %d records (%d bytes) to %s", d.ok, d.bytes, topic)
	if d.failed > 0 {
		fmt.Fprintf(&b, ", %d failed", d.failed)
	}
	b.WriteString("\n")
	parts := make([]int32, 0, len(d.parts))
	for p := range d.parts {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		s := d.parts[p]
		if noAcks {
			fmt.Fprintf(&b, "  partition %d: %d records (offsets unknown with acks=0)\n", p, s.n)
			continue
		}
		fmt.Fprintf(&b, "  partition %d: %d records at offsets %d-%d\n", p, s.n, s.first, s.last)
	}
	if d.firstErr != nil {
		err := fmt.Errorf("%d of %d records failed: %w", d.failed, d.failed+d.ok, d.firstErr)
		if errors.Is(d.firstErr, kgo.ErrRecordTimeout) {
			// The client retries retriable errors until the delivery
			// timeout and then reports only the timeout.
			err = fmt.Errorf("%w (the broker did not accept them within --timeout: it refused them with a retriable error, such as KAFKA_STORAGE_ERROR when its disk is below the low watermark, or did not answer; its log says which)", err)
		}
		return b.String(), err
	}
	return b.String(), nil
}

// unescape interprets \n \t \r \0 and \\ in s.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", fmt.Errorf(`a trailing \`)
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case '\\':
			b.WriteByte('\\')
		default:
			return "", fmt.Errorf(`unknown escape \%c (want \n \t \r \0 or \\)`, s[i])
		}
	}
	return b.String(), nil
}
