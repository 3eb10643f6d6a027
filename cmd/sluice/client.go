package main

// Client subcommands, in the habits of kcat and rpk: they talk to any
// Kafka-compatible broker (Sluice, Kafka, Redpanda) with franz-go.
//
//	sluice topic create NAME [-p PARTITIONS] [-c key=value ...]
//	sluice topic list
//	sluice topic delete NAME...
//	sluice produce -t TOPIC [-K DELIM] [-p PARTITION]   (one record per stdin line)
//	sluice consume -t TOPIC [-o beginning|end|OFFSET] [-e] [-G GROUP] [-f FORMAT]
//	sluice group list
//	sluice group describe GROUP...

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sluice/clientauth"
)

// brokersFlag adds -b, defaulting to SLUICE_BROKERS or the default
// listen address, and the connection-security flags (clientauth).
func brokersFlag(fs *flag.FlagSet) *string {
	security.AddFlags(fs)
	return fs.String("b", envOr("SLUICE_BROKERS", "127.0.0.1:9092"), "comma-separated seed brokers (env SLUICE_BROKERS)")
}

// security is how client commands connect (the flags brokersFlag adds);
// one command runs per process.
var security clientauth.Config

func newClient(brokers string, opts ...kgo.Opt) (*kgo.Client, error) {
	sec, err := security.Opts()
	if err != nil {
		return nil, err
	}
	all := append([]kgo.Opt{kgo.SeedBrokers(strings.Split(brokers, ",")...)}, sec...)
	return kgo.NewClient(append(all, opts...)...)
}

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func topicCmd(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("topic: want create, list or delete")
	}
	fs := flag.NewFlagSet("topic "+args[0], flag.ContinueOnError)
	brokers := brokersFlag(fs)
	partitions := fs.Int("p", 1, "partitions (create)")
	var configs multiFlag
	fs.Var(&configs, "c", "topic config key=value (create; repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	cl, err := newClient(*brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := signalContext()
	defer cancel()
	switch args[0] {
	case "create":
		if fs.NArg() != 1 {
			return errors.New("topic create: want one topic name")
		}
		conf := map[string]*string{}
		for _, kv := range configs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("topic create: config %q: want key=value", kv)
			}
			conf[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, int32(*partitions), 1, conf, fs.Arg(0))
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("topic create %s: %w", fs.Arg(0), err)
		}
		fmt.Fprintf(stdout, "created %s with %d partitions\n", resp.Topic, resp.NumPartitions)
	case "list":
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return fmt.Errorf("topic list: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tPARTITIONS")
		for _, t := range topics.Sorted() {
			fmt.Fprintf(tw, "%s\t%d\n", t.Topic, len(t.Partitions))
		}
		return tw.Flush()
	case "delete":
		if fs.NArg() == 0 {
			return errors.New("topic delete: want topic names")
		}
		resps, err := adm.DeleteTopics(ctx, fs.Args()...)
		if err != nil {
			return fmt.Errorf("topic delete: %w", err)
		}
		for _, r := range resps.Sorted() {
			if r.Err != nil {
				return fmt.Errorf("topic delete %s: %w", r.Topic, r.Err)
			}
			fmt.Fprintf(stdout, "deleted %s\n", r.Topic)
		}
	default:
		return fmt.Errorf("topic: unknown subcommand %q: want create, list or delete", args[0])
	}
	return nil
}

// produceCmd writes one record per line of stdin, acks=all, and reports
// how many were acknowledged.
func produceCmd(args []string, stdin io.Reader, stderr io.Writer) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	brokers := brokersFlag(fs)
	topic := fs.String("t", "", "topic (required)")
	delim := fs.String("K", "", "key delimiter: each line is KEY<DELIM>VALUE")
	partition := fs.Int("p", -1, "partition (-1: hash the key)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *topic == "" {
		return errors.New("produce: -t TOPIC is required")
	}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(*topic), kgo.AllowAutoTopicCreation()}
	if *partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := newClient(*brokers, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := signalContext()
	defer cancel()
	var (
		mu       sync.Mutex // guards n and firstErr, set by the produce callbacks
		n        int
		firstErr error
	)
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		r := &kgo.Record{Value: []byte(line), Partition: int32(*partition)}
		if *delim != "" {
			if k, v, ok := strings.Cut(line, *delim); ok {
				r.Key, r.Value = []byte(k), []byte(v)
			}
		}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if err == nil {
				n++
			}
		})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("produce: reading stdin: %w", err)
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("produce: %w (%d records acknowledged)", firstErr, n)
	}
	fmt.Fprintf(stderr, "produced %d records to %s\n", n, *topic)
	return nil
}

// consumeCmd prints records, by default as "%o %k %v".
func consumeCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	brokers := brokersFlag(fs)
	topic := fs.String("t", "", "topic (required)")
	from := fs.String("o", "beginning", "start: beginning, end or an offset (ignored for a group with committed offsets)")
	exit := fs.Bool("e", false, "exit at the end of every partition")
	group := fs.String("G", "", "consume as a member of this group, committing offsets")
	format := fs.String("f", "%p %o %k %v\n", "output format: %t topic, %p partition, %o offset, %k key, %v value, %h headers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *topic == "" {
		return errors.New("consume: -t TOPIC is required")
	}
	var start kgo.Offset
	switch *from {
	case "beginning":
		start = kgo.NewOffset().AtStart()
	case "end":
		start = kgo.NewOffset().AtEnd()
	default:
		o, err := strconv.ParseInt(*from, 10, 64)
		if err != nil || o < 0 {
			return fmt.Errorf("consume: -o %q: want beginning, end or an offset", *from)
		}
		start = kgo.NewOffset().At(o)
	}
	opts := []kgo.Opt{kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(start)}
	if *group != "" {
		opts = append(opts, kgo.ConsumerGroup(*group))
	}
	cl, err := newClient(*brokers, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := signalContext()
	defer cancel()

	var ends map[int32]int64
	if *exit {
		listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, *topic)
		if err != nil {
			return fmt.Errorf("consume: end offsets: %w", err)
		}
		ends = map[int32]int64{}
		listed.Each(func(o kadm.ListedOffset) {
			if o.Err == nil && o.Offset > 0 {
				ends[o.Partition] = o.Offset
			}
		})
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	for !*exit || len(ends) > 0 {
		if *exit && *group != "" {
			if err := dropCommitted(ctx, cl, *group, *topic, ends); err != nil {
				return err
			}
			if len(ends) == 0 {
				break
			}
		}
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("consume: %w", ferr)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			out.WriteString(formatRecord(*format, r))
			if end, ok := ends[r.Partition]; ok && r.Offset+1 >= end {
				delete(ends, r.Partition)
			}
		})
		out.Flush()
		if *group != "" {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				return fmt.Errorf("consume: commit: %w", err)
			}
		}
	}
	return nil
}

// dropCommitted removes from ends the partitions a group has already
// committed to their end, so that -e -G exits when nothing is left.
func dropCommitted(ctx context.Context, cl *kgo.Client, group, topic string, ends map[int32]int64) error {
	committed, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return fmt.Errorf("consume: committed offsets: %w", err)
	}
	for p, end := range ends {
		if c, ok := committed.Lookup(topic, p); ok && c.At >= end {
			delete(ends, p)
		}
	}
	return nil
}

func formatRecord(format string, r *kgo.Record) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c == '\\' && i+1 < len(format) && format[i+1] == 'n' {
			b.WriteByte('\n')
			i++
			continue
		}
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 't':
			b.WriteString(r.Topic)
		case 'p':
			b.WriteString(strconv.Itoa(int(r.Partition)))
		case 'o':
			b.WriteString(strconv.FormatInt(r.Offset, 10))
		case 'k':
			b.Write(r.Key)
		case 'v', 's':
			b.Write(r.Value)
		case 'T':
			b.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
		case 'h':
			for j, h := range r.Headers {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(h.Key + "=" + string(h.Value))
			}
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

func groupCmd(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("group: want list or describe")
	}
	fs := flag.NewFlagSet("group "+args[0], flag.ContinueOnError)
	brokers := brokersFlag(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	cl, err := newClient(*brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	switch args[0] {
	case "list":
		groups, err := adm.ListGroups(ctx)
		if err != nil {
			return fmt.Errorf("group list: %w", err)
		}
		fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL")
		for _, g := range groups.Sorted() {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Group, g.State, g.ProtocolType)
		}
	case "describe":
		if fs.NArg() == 0 {
			return errors.New("group describe: want group names")
		}
		lags, err := adm.Lag(ctx, fs.Args()...)
		if err != nil {
			return fmt.Errorf("group describe: %w", err)
		}
		fmt.Fprintln(tw, "GROUP\tSTATE\tTOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER")
		names := make([]string, 0, len(lags))
		for name := range lags {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			l := lags[name]
			if l.Error() != nil {
				return fmt.Errorf("group describe %s: %w", name, l.Error())
			}
			for _, pl := range l.Lag.Sorted() {
				member := ""
				if pl.Member != nil {
					member = pl.Member.MemberID
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", name, l.State, pl.Topic, pl.Partition, pl.Commit.At, pl.End.Offset, pl.Lag, member)
			}
		}
	default:
		return fmt.Errorf("group: unknown subcommand %q: want list or describe", args[0])
	}
	return nil
}
