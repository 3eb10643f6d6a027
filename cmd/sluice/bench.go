package main

// sluice bench: a load generator for Sluice, Kafka or Redpanda, in the
// manner of kafka-producer-perf-test (logic in internal/bench).

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/bench"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce and consume throughput and latency against any Kafka-compatible broker",
		Long: `Measure produce and consume throughput and latency against Sluice, Kafka or
Redpanda. A progress line is printed every --interval and a summary at the
end. With --broker-pid, the broker's own CPU time per record and its memory
are read from /proc (the broker must run on this machine). bench floor
measures the disk under a data directory: the latency of one small
write and fdatasync, the least a durable acknowledgement can take there.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newBenchProduceCmd(), newBenchConsumeCmd(), newBenchFloorCmd())
	return cmd
}

// benchCommon are the flags both bench subcommands take.
type benchCommon struct {
	cf       *clientFlags
	topic    string
	pid      int
	interval time.Duration
	asJSON   bool
}

func (c *benchCommon) add(cmd *cobra.Command) {
	c.cf = addClientFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&c.topic, "topic", "t", "sluice-bench", "topic to use")
	f.IntVar(&c.pid, "broker-pid", 0, "process id of a local broker: report its CPU time per record and memory")
	f.DurationVar(&c.interval, "interval", time.Second, "progress line interval (0: none)")
	f.BoolVar(&c.asJSON, "json", false, "print the summary as one JSON object on stdout")
}

func (c *benchCommon) report(out io.Writer, what string, res bench.Result) error {
	if c.asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	bench.WriteSummary(out, what, res)
	return nil
}

func newBenchProduceCmd() *cobra.Command {
	var (
		common      benchCommon
		cfg         bench.ProduceConfig
		acks        string
		compression string
		linger      time.Duration
		floorDir    string
		floorPeer   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Produce records as fast as allowed and report throughput and latency",
		Example: `  sluice bench produce -t bench --records 1000000 --size 100
  sluice bench produce -t bench --sync --callers 64 --duration 10s
  sluice bench produce -t bench --partitions 256 --rate 50000 --compression zstd`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := runLength(cmd.Flags(), &cfg); err != nil {
				return err
			}
			if floorPeer < 0 {
				return usagef("--floor-peer %v: want 0 (off) or more", floorPeer)
			}
			var opts []kgo.Opt
			switch acks {
			case "all", "-1":
				opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
			case "leader", "1":
				opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
			case "none", "0":
				opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
			default:
				return usagef("--acks %q: want all, leader or none", acks)
			}
			codec, err := compressionCodec(compression)
			if err != nil {
				return usageError{err}
			}
			opts = append(opts, kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(linger),
				kgo.RecordPartitioner(kgo.ManualPartitioner()))
			c, err := common.cf.connect(cmd.Context(), opts...)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			sctx, cancel := c.step(ctx)
			err = bench.EnsureTopic(sctx, c.cl, common.topic, cfg.Partitions)
			cancel()
			if err != nil {
				return c.wrap("create topic", err)
			}
			var floor *bench.FloorResult
			if floorDir != "" {
				fr, err := bench.Floor(ctx, bench.FloorConfig{Dir: floorDir, Ops: floorOpsWithRun, Size: 4096, Peer: floorPeer})
				if err != nil {
					return fmt.Errorf("bench produce --floor: %w", err)
				}
				floor = &fr
			}
			cfg.Topic, cfg.BrokerPID, cfg.Interval = common.topic, common.pid, common.interval
			cfg.Progress = cmd.ErrOrStderr()
			res, err := bench.Produce(ctx, c.cl, cfg)
			if err != nil {
				return err
			}
			res.Floor = floor
			if err := common.report(cmd.OutOrStdout(), "produce", res); err != nil {
				return err
			}
			if res.Errors > 0 {
				return fmt.Errorf("%d records failed: %s", res.Errors, res.FirstErr)
			}
			return nil
		},
	}
	common.add(cmd)
	f := cmd.Flags()
	f.Int64VarP(&cfg.Records, "records", "n", 100000, "records to produce (0 or --duration: run for a time instead)")
	f.DurationVar(&cfg.Duration, "duration", 0, "run for this long instead of producing --records records")
	f.IntVarP(&cfg.Size, "size", "s", 100, "value size in bytes (random, incompressible)")
	f.IntVar(&cfg.Rate, "rate", 0, "records per second over all callers (0: unlimited)")
	f.IntVarP(&cfg.Callers, "callers", "c", 1, "goroutines producing")
	f.BoolVar(&cfg.Sync, "sync", false, "each caller waits for each record's acknowledgement")
	f.Int32VarP(&cfg.Partitions, "partitions", "p", 1, "spread records round robin over this many partitions (created if the topic is missing)")
	f.StringVar(&acks, "acks", "all", "all, leader or none")
	f.StringVarP(&compression, "compression", "z", "none", "none, gzip, snappy, lz4 or zstd")
	f.DurationVar(&linger, "linger", 0, "producer linger (Kafka's linger.ms)")
	f.StringVar(&floorDir, "floor", "", "before the run, measure the disk's floor (as bench floor) in this directory, the broker's --data, and report it beside the latencies")
	f.DurationVar(&floorPeer, "floor-peer", 0, "with --floor: each of its writes after a round trip to a peer busy this long (as bench floor --peer; e.g. 100us beside --sync --callers 1)")
	return cmd
}

// runLength settles how long bench produce runs: --duration alone
// replaces the default record count, and a run cannot be bounded by both.
func runLength(f *pflag.FlagSet, cfg *bench.ProduceConfig) error {
	if f.Changed("duration") && !f.Changed("records") {
		cfg.Records = 0
	}
	switch {
	case cfg.Records > 0 && cfg.Duration > 0:
		return usagef("bench produce: give --records or --duration, not both")
	case cfg.Records < 0:
		return usagef("bench produce: --records %d: want 0 or more", cfg.Records)
	case cfg.Records == 0 && cfg.Duration <= 0:
		return usagef("bench produce: --records 0 needs a --duration above 0")
	}
	return nil
}

func newBenchConsumeCmd() *cobra.Command {
	var (
		common benchCommon
		cfg    bench.ConsumeConfig
	)
	cmd := &cobra.Command{
		Use:     "consume",
		Short:   "Read a topic from the start and report throughput",
		Example: `  sluice bench consume -t bench`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := common.cf.connect(cmd.Context(), bench.ConsumeClientOpts(common.topic)...)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			cfg.Topic, cfg.BrokerPID, cfg.Interval = common.topic, common.pid, common.interval
			cfg.Progress = cmd.ErrOrStderr()
			res, err := bench.Consume(ctx, c.cl, cfg)
			if err != nil {
				return fmt.Errorf("bench consume: %w", err)
			}
			return common.report(cmd.OutOrStdout(), "consume", res)
		},
	}
	common.add(cmd)
	cmd.Flags().Int64VarP(&cfg.Records, "records", "n", 0, "stop after this many records (0: at the end offsets when the run started)")
	return cmd
}

func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("--compression %q: want none, gzip, snappy, lz4 or zstd", name)
}

// floorOpsWithRun is how many writes bench produce --floor times before
// its run: enough for a p99, a second or so on a disk syncing in 1 ms.
const floorOpsWithRun = 1000

func newBenchFloorCmd() *cobra.Command {
	var (
		cfg              bench.FloorConfig
		asJSON           bool
		parts, partBytes int
		memMiB, segMiB   int
	)
	cmd := &cobra.Command{
		Use:   "floor",
		Short: "Measure the latency of a small write and fdatasync on the data directory's disk",
		Long: `Measure the disk under a data directory: create a scratch file there,
write zeros over it and sync them (as the broker preallocates its
segments), then time small overwrites, each followed by fdatasync, one at
a time, and remove the file. The latency quantiles are the floor of any
durable (acks=all) produce latency on that disk, and the writes per
second the most one writer syncing each write can reach. With --peer D
each write first waits for a busy peer that answers after D, as a
broker's next write waits for a client's next request: on a virtual
machine a processor left idle makes the next fdatasync slower, so this
is the floor to compare one synchronous producer's latency with. No broker is
needed; run it beside a broker's benchmark to state its floor from the
same machine and run. With --partitions N it also makes N directories,
each with a file of --partition-bytes, durable in one batch of
filesystem syncs, and reports the time and CPU: the least a broker that
keeps a directory and a file per partition pays before N fresh
partitions hold their first bytes. With --memory N it also writes once
to every page of N MiB new to the process and reports the time and CPU
per page: what a fresh broker pays for each buffer it grows into (on a
virtual machine whose host takes back the guest's free pages, several
times what it costs on the host). With --segments N it also appends N
MiB in 16 KiB writes to 16 new files through the page cache, as
partitions' segments take their bytes, then fdatasyncs each, and reports
the CPU per MiB: what a durable broker pays to keep each byte in its
segments, beside an in-memory broker that keeps it in its heap.`,
		Example: `  sluice bench floor --data ./sluice-data
  sluice bench floor --data /var/lib/sluice --duration 10s --size 512
  sluice bench floor --data ./sluice-data --partitions 2000 --memory 256
  sluice bench floor --data ./sluice-data --segments 256`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if f.Changed("duration") && !f.Changed("ops") {
				cfg.Ops = 0
			}
			if cfg.Ops > 0 && cfg.Duration > 0 {
				return usagef("bench floor: give --ops or --duration, not both")
			}
			if cfg.Ops < 0 || (cfg.Ops == 0 && cfg.Duration <= 0) {
				return usagef("bench floor: --ops %d: want more than 0, or a --duration above 0", cfg.Ops)
			}
			if cfg.Size < 1 {
				return usagef("bench floor: --size %d: want 1 or more", cfg.Size)
			}
			if cfg.Peer < 0 {
				return usagef("bench floor: --peer %v: want 0 (off) or more", cfg.Peer)
			}
			if parts < 0 {
				return usagef("bench floor: --partitions %d: want 0 (off) or more", parts)
			}
			if memMiB < 0 {
				return usagef("bench floor: --memory %d: want 0 (off) or more MiB", memMiB)
			}
			if segMiB < 0 {
				return usagef("bench floor: --segments %d: want 0 (off) or more MiB", segMiB)
			}
			res, err := bench.Floor(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("bench floor: %w", err)
			}
			if parts > 0 {
				fr, err := bench.FilesFloor(cmd.Context(), bench.FilesFloorConfig{Dir: cfg.Dir, Partitions: parts, Bytes: partBytes})
				if err != nil {
					return fmt.Errorf("bench floor --partitions: %w", err)
				}
				res.Files = &fr
			}
			if memMiB > 0 {
				mr, err := bench.MemoryFloor(int64(memMiB) << 20)
				if err != nil {
					return fmt.Errorf("bench floor --memory: %w", err)
				}
				res.Memory = &mr
			}
			if segMiB > 0 {
				sr, err := bench.SegmentsFloor(cmd.Context(), bench.SegmentsFloorConfig{Dir: cfg.Dir, Bytes: int64(segMiB) << 20})
				if err != nil {
					return fmt.Errorf("bench floor --segments: %w", err)
				}
				res.Segments = &sr
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			bench.WriteFloor(cmd.OutOrStdout(), res)
			if res.Files != nil {
				bench.WriteFilesFloor(cmd.OutOrStdout(), *res.Files)
			}
			if res.Memory != nil {
				bench.WriteMemoryFloor(cmd.OutOrStdout(), *res.Memory)
			}
			if res.Segments != nil {
				bench.WriteSegmentsFloor(cmd.OutOrStdout(), *res.Segments)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "data", broker.DefaultDataDir, "directory on the disk to measure (the broker's --data)")
	f.IntVarP(&cfg.Ops, "ops", "n", 2000, "writes to time (0 or --duration: run for a time instead)")
	f.DurationVar(&cfg.Duration, "duration", 0, "run for this long instead of timing --ops writes")
	f.IntVarP(&cfg.Size, "size", "s", 4096, "bytes per write")
	f.DurationVar(&cfg.Peer, "peer", 0, "before each write, wait for a peer that answers after spinning this long (a client preparing its next request, e.g. 100us): the floor of one synchronous producer, whose broker idles between requests; 0: writes back to back")
	f.IntVar(&parts, "partitions", 0, "also measure making this many partition directories, each with a segment file of --partition-bytes, durable (what a durable broker pays for fresh partitions' first writes); 0: off")
	f.IntVar(&partBytes, "partition-bytes", 16384, "bytes written to each partition's file with --partitions")
	f.IntVar(&memMiB, "memory", 0, "also measure the first touch of this many MiB of memory new to the process (what a fresh broker pays for each buffer it grows into); 0: off")
	f.IntVar(&segMiB, "segments", 0, "also measure appending this many MiB in 16 KiB writes to segment files through the page cache, and their fdatasync (what a durable broker pays per byte it keeps in its segments); 0: off")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object on stdout")
	return cmd
}
