package integration

// TLS against plaintext, same broker, same run:
//
//	go -C integration test . -run '^$' -bench BenchmarkTLS -benchtime 3s -count 3
//
// One broker with a PLAINTEXT and an SSL listener (server certificate
// only, ECDSA P-256, TLS 1.3 negotiated by Go); the franz-go client
// connects to one or the other. cpu-µs/record is the whole test
// process's utime+stime (broker and client together) per record.

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

func cpuTime() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func forTLS(b *testing.B, fn func(b *testing.B, addr string, opts ...kgo.Opt)) {
	certs := brokertest.NewCerts(b, "bench-ca")
	for _, mode := range []string{"plaintext", "tls"} {
		b.Run(mode, func(b *testing.B) {
			br, err := broker.New(broker.DataDir(b.TempDir()),
				broker.Listeners(
					broker.Listener{Protocol: broker.Plaintext, Addr: "127.0.0.1:0"},
					broker.Listener{Protocol: broker.SSL, Addr: "127.0.0.1:0"}),
				broker.TLSFiles(certs.ServerCert, certs.ServerKey, ""))
			if err != nil {
				b.Fatal(err)
			}
			if err := br.Start(); err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			if err := br.CreateTopic(context.Background(), benchTopic, 1, nil); err != nil {
				b.Fatal(err)
			}
			if mode == "plaintext" {
				fn(b, br.ListenerAddr(broker.Plaintext))
			} else {
				fn(b, br.ListenerAddr(broker.SSL), kgo.DialTLSConfig(certs.ClientTLS(b, "")))
			}
		})
	}
}

func BenchmarkTLS(b *testing.B) {
	b.Run("ProduceAsync100B", func(b *testing.B) {
		forTLS(b, func(b *testing.B, addr string, opts ...kgo.Opt) {
			cl := benchClient(b, addr, opts...)
			defer cl.Close()
			produceAsync(b, cl, 1000, 100)
			cpu := cpuTime()
			b.ResetTimer()
			produceAsync(b, cl, b.N, 100)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/record")
		})
	})
	b.Run("Consume", func(b *testing.B) {
		forTLS(b, func(b *testing.B, addr string, opts ...kgo.Opt) {
			pcl := benchClient(b, addr, opts...)
			produceAsync(b, pcl, b.N, 100)
			pcl.Close()
			cl := benchClient(b, addr, append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
				benchTopic: {0: kgo.NewOffset().AtStart()},
			}), kgo.FetchMaxBytes(64<<20))...)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cpu := cpuTime()
			b.ResetTimer()
			got := 0
			for got < b.N {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					b.Fatalf("consumed %d of %d", got, b.N)
				}
				fs.EachError(func(_ string, _ int32, err error) { b.Fatal(err) })
				got += fs.NumRecords()
			}
			b.StopTimer()
			b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(got), "cpu-µs/record")
		})
	})
	b.Run("Produce16KiB", func(b *testing.B) {
		const size = 16 << 10
		forTLS(b, func(b *testing.B, addr string, opts ...kgo.Opt) {
			cl := benchClient(b, addr, append(opts, kgo.ProducerBatchMaxBytes(1<<20))...)
			defer cl.Close()
			produceAsync(b, cl, 100, size)
			b.SetBytes(size)
			cpu := cpuTime()
			b.ResetTimer()
			produceAsync(b, cl, b.N, size)
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/record")
		})
	})
}
