// Package bench is a load generator for Kafka-compatible brokers (Sluice,
// Kafka, Redpanda), in the manner of kafka-producer-perf-test: it produces
// or consumes records with a franz-go client, prints a progress line every
// interval and a final summary with throughput and latency quantiles, and,
// given the broker's process id, the broker's own CPU time per record.
package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceConfig describes a produce run.
type ProduceConfig struct {
	Topic      string
	Records    int64         // records to produce; 0 means until Duration
	Duration   time.Duration // run length when Records is 0
	Size       int           // value bytes per record (random, incompressible)
	Rate       int           // records per second over all callers; 0 is unlimited
	Callers    int           // goroutines producing
	Sync       bool          // each caller waits for each record (ProduceSync of one record)
	Partitions int32         // records go round robin to partitions 0..Partitions-1; the topic is created with this many when missing
	BrokerPID  int           // when > 0, the broker's CPU and memory are read from /proc
	Interval   time.Duration // progress line interval; 0 disables progress
	Progress   io.Writer     // where progress lines go (nil: none)
}

func (c *ProduceConfig) validate() error {
	switch {
	case c.Topic == "":
		return errors.New("a topic is required")
	case c.Records < 0:
		return fmt.Errorf("records %d must not be negative", c.Records)
	case c.Records == 0 && c.Duration <= 0:
		return errors.New("give a record count or a duration")
	case c.Size < 0:
		return fmt.Errorf("record size %d must not be negative", c.Size)
	case c.Callers < 1:
		return fmt.Errorf("callers %d must be at least 1", c.Callers)
	case c.Partitions < 1:
		return fmt.Errorf("partitions %d must be at least 1", c.Partitions)
	case c.Rate < 0:
		return fmt.Errorf("rate %d must not be negative", c.Rate)
	}
	return nil
}

// Result is the outcome of a run.
type Result struct {
	Records   int64         `json:"records"`
	Bytes     int64         `json:"bytes"` // value bytes (plus key bytes when consuming)
	Errors    int64         `json:"errors"`
	FirstErr  string        `json:"first_error,omitempty"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	Latency   Latencies     `json:"latency_ns,omitzero"` // produce: per-record acknowledgement latency
	BrokerCPU time.Duration `json:"broker_cpu_ns,omitempty"`
	BrokerRSS int64         `json:"broker_rss_bytes,omitempty"`
	BrokerHWM int64         `json:"broker_peak_rss_bytes,omitempty"`
	// BrokerFaults is the broker's minor page faults over the run (see
	// ProcUsage.Faults).
	BrokerFaults int64 `json:"broker_minor_faults,omitempty"`
	// Floor, when measured (bench produce --floor), is the disk's latency
	// of one small write and fdatasync, measured just before the run.
	Floor *FloorResult `json:"floor,omitempty"`
}

// RecordsPerSec is the throughput in records per second.
func (r Result) RecordsPerSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// MBPerSec is the throughput in MB (10^6 bytes) per second.
func (r Result) MBPerSec() float64 { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }

// CPUPerRecord is the broker's CPU time per record, or 0 when unknown.
func (r Result) CPUPerRecord() time.Duration {
	if r.Records == 0 {
		return 0
	}
	return r.BrokerCPU / time.Duration(r.Records)
}

// counters are the live figures a run updates and progress reads.
type counters struct {
	records, bytes, errs atomic.Int64
	firstErr             atomic.Value // string
	hist                 Histogram
}

func (c *counters) fail(err error) {
	c.errs.Add(1)
	c.firstErr.CompareAndSwap(nil, err.Error())
}

// EnsureTopic creates topic with the given partition count when it does
// not exist, and checks that an existing one has at least that many.
func EnsureTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return err
	}
	if t, ok := td[topic]; ok && t.Err == nil {
		if n := int32(len(t.Partitions)); n < partitions {
			return fmt.Errorf("topic %q has %d partitions, the run wants %d", topic, n, partitions)
		}
		return nil
	}
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err != nil {
		return err
	}
	if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %q: %w %s", topic, resp.Err, resp.ErrMessage)
	}
	return nil
}

// Produce runs a produce load with client cl (whose options set acks,
// compression and the rest) and returns the result. It stops issuing
// records early when ctx is done, waits for those in flight, and returns
// what it has.
func Produce(ctx context.Context, cl *kgo.Client, cfg ProduceConfig) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	value := make([]byte, cfg.Size)
	if _, err := rand.Read(value); err != nil {
		return Result{}, err
	}
	var c counters
	var next atomic.Int64 // the next record number a caller claims
	total := cfg.Records
	// Records go out under a context the run's end does not cancel: the
	// end of --duration (or ctx) stops issuing records, and those in
	// flight complete (Flush waits for them) instead of failing with the
	// context's error.
	recCtx := context.WithoutCancel(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if total == 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, cfg.Duration)
		defer stop()
		total = 1<<63 - 1
	}
	pace := newPacer(cfg.Rate)

	// The latency is taken from a start time of our own: the record's
	// Timestamp is truncated to milliseconds on the way.
	done := func(start time.Time, r *kgo.Record, err error) {
		if err != nil {
			c.fail(err)
			return
		}
		c.hist.Record(time.Since(start))
		c.records.Add(1)
		c.bytes.Add(int64(len(r.Value)))
	}

	before, err := readBroker(cfg.BrokerPID)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	stopProgress := progress(cfg.Interval, cfg.Progress, start, &c)
	var wg sync.WaitGroup
	for range cfg.Callers {
		wg.Go(func() {
			for ctx.Err() == nil {
				n := next.Add(1) - 1
				if n >= total {
					return
				}
				if err := pace.wait(ctx, n); err != nil {
					return
				}
				r := &kgo.Record{
					Topic:     cfg.Topic,
					Partition: int32(n % int64(cfg.Partitions)),
					Value:     value,
				}
				t0 := time.Now()
				if cfg.Sync {
					res := cl.ProduceSync(recCtx, r)
					done(t0, r, res.FirstErr())
				} else {
					cl.Produce(recCtx, r, func(r *kgo.Record, err error) { done(t0, r, err) })
				}
			}
		})
	}
	wg.Wait()
	if err := cl.Flush(recCtx); err != nil {
		c.fail(err)
	}
	res := finish(&c, start, cfg.BrokerPID, before)
	stopProgress()
	return res, nil
}

// finish builds the Result from the counters and the broker's usage.
func finish(c *counters, start time.Time, pid int, before ProcUsage) Result {
	res := Result{
		Records: c.records.Load(),
		Bytes:   c.bytes.Load(),
		Errors:  c.errs.Load(),
		Elapsed: time.Since(start),
		Latency: c.hist.Summary(),
	}
	if s, ok := c.firstErr.Load().(string); ok {
		res.FirstErr = s
	}
	if pid > 0 {
		if after, err := ReadProc(pid); err == nil {
			res.BrokerCPU = after.CPU - before.CPU
			res.BrokerRSS = after.RSS
			res.BrokerHWM = after.PeakRSS
			res.BrokerFaults = after.Faults - before.Faults
		}
	}
	return res
}

func readBroker(pid int) (ProcUsage, error) {
	if pid <= 0 {
		return ProcUsage{}, nil
	}
	u, err := ReadProc(pid)
	if err != nil {
		return u, fmt.Errorf("broker process %d: %w", pid, err)
	}
	return u, nil
}

// pacer spaces records to a rate over all callers: record n may start at
// start + n/rate.
type pacer struct {
	rate  int
	start time.Time
}

func newPacer(rate int) *pacer { return &pacer{rate: rate, start: time.Now()} }

func (p *pacer) wait(ctx context.Context, n int64) error {
	if p.rate <= 0 {
		return nil
	}
	at := p.start.Add(time.Duration(n) * time.Second / time.Duration(p.rate))
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// progress prints a line every interval until the returned func is called.
// The goroutine it starts is owned by the caller and stops when that func
// returns.
func progress(every time.Duration, w io.Writer, start time.Time, c *counters) func() {
	if every <= 0 || w == nil {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		var lastRecs, lastBytes int64
		last := start
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				recs, byts := c.records.Load(), c.bytes.Load()
				secs := now.Sub(last).Seconds()
				fmt.Fprintf(w, "%7.1fs %12.0f rec/s %9.2f MB/s  p50 %s  p99 %s  errors %d\n",
					now.Sub(start).Seconds(), float64(recs-lastRecs)/secs,
					float64(byts-lastBytes)/1e6/secs,
					fmtDur(c.hist.Quantile(0.5)), fmtDur(c.hist.Quantile(0.99)), c.errs.Load())
				lastRecs, lastBytes, last = recs, byts, now
			}
		}
	})
	return func() { close(stop); wg.Wait() }
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// WriteSummary prints a result for a person.
func WriteSummary(w io.Writer, what string, r Result) {
	fmt.Fprintf(w, "%s: %d records, %.1f MB in %.2fs: %.0f rec/s, %.2f MB/s, %d errors\n",
		what, r.Records, float64(r.Bytes)/1e6, r.Elapsed.Seconds(), r.RecordsPerSec(), r.MBPerSec(), r.Errors)
	if r.FirstErr != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstErr)
	}
	if r.Latency.Max > 0 {
		l := r.Latency
		fmt.Fprintf(w, "latency: p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
			fmtDur(l.P50), fmtDur(l.P90), fmtDur(l.P99), fmtDur(l.P999), fmtDur(l.Max))
	}
	if f := r.Floor; f != nil {
		peer := ""
		if f.Peer > 0 {
			peer = ", each after a " + fmtDur(f.Peer) + " peer"
		}
		fmt.Fprintf(w, "floor:   p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (%d B write + fdatasync in %s%s, %.0f ops/s)\n",
			fmtDur(f.Latency.P50), fmtDur(f.Latency.P90), fmtDur(f.Latency.P99), fmtDur(f.Latency.P999), fmtDur(f.Latency.Max),
			f.Size, f.Dir, peer, f.OpsPerSec())
	}
	if r.BrokerCPU > 0 {
		fmt.Fprintf(w, "broker: cpu %.2fs (%.2fµs/record), rss %.1f MiB, peak rss %.1f MiB, %d page faults\n",
			r.BrokerCPU.Seconds(), float64(r.CPUPerRecord())/float64(time.Microsecond),
			float64(r.BrokerRSS)/(1<<20), float64(r.BrokerHWM)/(1<<20), r.BrokerFaults)
	}
}
