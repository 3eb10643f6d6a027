//go:build unix

package console

import (
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
)

// BenchmarkProduceWithConsole measures pipelined produce of 100 B
// records (acks=all, fsync always, one partition, as the broker
// benchmark (a)) with the console closed and open:
//
//   - closed: no console at all (no sampler, no HTTP server);
//   - open: the console at its defaults (a sample every 2 s) and a
//     client that does what an open Overview page does every second
//     (its fastest refresh): /api/v1/cluster and the five history
//     queries of its charts;
//   - open-busy: a sample every 100 ms, and ten times a second the
//     overview queries, a Prometheus scrape of /metrics, the topics
//     table, the topic page and its chart, and a 50-record
//     message-browser page (a new Kafka consumer each time).
//
// Besides records/s it reports the process's CPU time (utime+stime)
// per record: broker, client and console share the process, so any CPU
// the console takes shows there.
func BenchmarkProduceWithConsole(b *testing.B) {
	for _, mode := range []struct {
		name   string
		open   bool
		sample time.Duration
		poll   time.Duration
		busy   bool
	}{
		{"closed", false, 0, 0, false},
		{"open", true, DefaultSampleEvery, time.Second, false},
		{"open-busy", true, 100 * time.Millisecond, 100 * time.Millisecond, true},
	} {
		b.Run(mode.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			br, err := broker.New(broker.DataDir(b.TempDir()), broker.ListenAddr("127.0.0.1:0"), broker.Registerer(reg))
			if err != nil {
				b.Fatal(err)
			}
			if err := br.Start(); err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			if err := br.CreateTopic(context.Background(), "bench", 1, nil); err != nil {
				b.Fatal(err)
			}
			var polls int
			stopPoll := func() {}
			if mode.open {
				s, err := New(Config{Broker: br, Gatherer: reg, SampleEvery: mode.sample})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				hs := httptest.NewServer(s.Handler())
				defer hs.Close()
				stopPoll = poll(b, hs.URL, mode.poll, mode.busy, &polls)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()), kgo.DefaultProduceTopic("bench"),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			value := make([]byte, 100)
			rand.Read(value)
			produce(b, cl, 1000, value) // warm up: metadata, producer id
			cpu0 := cpuTime()
			b.ResetTimer()
			produce(b, cl, b.N, value)
			b.StopTimer()
			cpu := cpuTime() - cpu0
			stopPoll()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/record")
			if mode.open {
				b.ReportMetric(float64(polls), "polls")
			}
		})
	}
}

func produce(b *testing.B, cl *kgo.Client, n int, value []byte) {
	var wg sync.WaitGroup
	var once sync.Once
	wg.Add(n)
	for i := 0; i < n; i++ {
		cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				once.Do(func() { b.Error(err) })
			}
			wg.Done()
		})
	}
	wg.Wait()
}

// poll requests what an open console page requests, every interval,
// until the returned func is called; it counts the rounds in *n.
func poll(b *testing.B, base string, every time.Duration, busy bool, n *int) (stop func()) {
	paths := []string{
		"/api/v1/cluster",
		"/api/v1/history?series=produce.records,fetch.records",
		"/api/v1/history?series=produce.bytes,fetch.bytes",
		"/api/v1/history?series=fsync.p50,fsync.p99",
		"/api/v1/history?series=fsync.appends,queue.depth",
		"/api/v1/history?prefix=requests.",
	}
	if busy {
		paths = append(paths,
			"/metrics",
			"/api/v1/topics",
			"/api/v1/topics/bench",
			"/api/v1/history?prefix=topic/bench/",
			"/api/v1/topics/bench/partitions/0/records?limit=50",
		)
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			for _, p := range paths {
				resp, err := http.Get(base + p)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("GET %s: %d", p, resp.StatusCode)
					return
				}
			}
			*n++
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
