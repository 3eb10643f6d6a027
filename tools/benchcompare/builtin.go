package main

// Workloads benchcompare measures itself, with a franz-go client of its
// own, where `sluice bench` has no mode for them.

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/bench"
)

// createTopic times one CreateTopics request for a topic of n partitions
// on a fresh broker: from the request's send to its answer, with the
// broker's CPU over the same span. The client is connected first (a
// metadata request) and the broker left to settle (its CPU quiet: a
// default Sluice opens its schema registry's topic just after it
// listens), so the time is the creation's alone.
func createTopic(n int32) func(addr string, pid int) (bench.Result, error) {
	return func(addr string, pid int) (bench.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			return bench.Result{}, err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		if _, err := adm.BrokerMetadata(ctx); err != nil {
			return bench.Result{}, err
		}
		before, err := settledProc(pid)
		if err != nil {
			return bench.Result{}, err
		}
		start := time.Now()
		resp, err := adm.CreateTopic(ctx, n, -1, nil, "created")
		elapsed := time.Since(start)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return bench.Result{}, fmt.Errorf("create a topic of %d partitions: %w", n, err)
		}
		after, err := settledProc(pid)
		if err != nil {
			return bench.Result{}, err
		}
		return bench.Result{Records: int64(n), Elapsed: elapsed, BrokerCPU: after.CPU - before.CPU, BrokerHWM: after.PeakRSS,
			BrokerFaults: after.Faults - before.Faults}, nil
	}
}

// coldSticky creates a topic of n partitions and at once produces
// records 100 B records (incompressible, acks=all, idempotent) through
// franz-go's default partitioner, which fills one partition's batch at
// a time (sticky): the first writes to freshly created partitions. The
// time and the broker's CPU count the creation and the records.
//
// With warm set, the broker has first taken as many records to a topic
// of one partition (same client, then idle until its CPU settles), so
// that what the run measures is the new partitions' cost on a broker
// that has been serving, not a fresh process's first use of its
// buffers and heap.
func coldSticky(n int32, records int, warm bool) func(addr string, pid int) (bench.Result, error) {
	return func(addr string, pid int) (bench.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("cold"),
			kgo.MaxBufferedRecords(1<<20))
		if err != nil {
			return bench.Result{}, err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		if _, err := adm.BrokerMetadata(ctx); err != nil {
			return bench.Result{}, err
		}
		vals := make([]byte, 100*1024)
		rand.Read(vals)
		if warm {
			resp, err := adm.CreateTopic(ctx, 1, -1, nil, "warmup")
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				return bench.Result{}, fmt.Errorf("create the warm-up topic: %w", err)
			}
			if err := produceAll(ctx, cl, "warmup", records, vals); err != nil {
				return bench.Result{}, fmt.Errorf("warm-up: %w", err)
			}
			if _, err := settledProc(pid); err != nil {
				return bench.Result{}, err
			}
		}
		before, err := bench.ReadProc(pid)
		if err != nil {
			return bench.Result{}, err
		}
		start := time.Now()
		resp, err := adm.CreateTopic(ctx, n, -1, nil, "cold")
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return bench.Result{}, fmt.Errorf("create a topic of %d partitions: %w", n, err)
		}
		if err := produceAll(ctx, cl, "cold", records, vals); err != nil {
			return bench.Result{}, err
		}
		elapsed := time.Since(start)
		after, err := settledProc(pid)
		if err != nil {
			return bench.Result{}, err
		}
		return bench.Result{Records: int64(records), Bytes: int64(records) * 100, Elapsed: elapsed,
			BrokerCPU: after.CPU - before.CPU, BrokerHWM: after.PeakRSS, BrokerFaults: after.Faults - before.Faults}, nil
	}
}

// produceAll produces records 100 B values from vals to topic through
// cl's partitioner and waits for every acknowledgement.
func produceAll(ctx context.Context, cl *kgo.Client, topic string, records int, vals []byte) error {
	var (
		mu       sync.Mutex
		firstErr error
		errs     int64
	)
	for i := range records {
		off := (i % 1024) * 100
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: vals[off : off+100]}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				errs++
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if firstErr != nil {
		return fmt.Errorf("%d of %d records failed: %w", errs, records, firstErr)
	}
	return nil
}

// settledProc reads pid's usage until its CPU time stops growing (at
// most 10 ms, one clock tick, over 200 ms; 10 s at most) and returns the
// reading before that quiet span, so that work a broker defers past its
// answers, such as making new partitions' files, counts in the CPU of
// the workload that caused it, and a broker that defers nothing reads
// as at once.
func settledProc(pid int) (bench.ProcUsage, error) {
	last, err := bench.ReadProc(pid)
	if err != nil {
		return last, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		u, err := bench.ReadProc(pid)
		if err != nil {
			return u, err
		}
		if u.CPU-last.CPU <= 10*time.Millisecond {
			last.PeakRSS = u.PeakRSS
			return last, nil
		}
		last = u
	}
	return last, nil
}
