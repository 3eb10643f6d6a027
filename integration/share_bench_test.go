package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/bench"
)

// BenchmarkShareGroups measures share-group consumption: a topic of 4
// partitions is loaded with shareBenchRecords records, then 1, 4 or 16
// kgo share consumers accept every record; records/s is the rate from
// the consumers' start to the last acceptance, CPU/record the broker's
// utime+stime over the same span. Sluice (fsync always) and in-memory
// kfake each run as a process of their own, the runs interleaved round
// by round; a classic consumer group on Sluice reads the same load for
// reference. Run with -benchtime 1x (each iteration is the whole
// comparison); the medians of shareBenchRounds rounds are logged and
// reported.
func BenchmarkShareGroups(b *testing.B) {
	dir := b.TempDir()
	sluiceBin, kfakeBin := filepath.Join(dir, "sluice"), filepath.Join(dir, "kfakeserver")
	for _, bin := range [][2]string{{sluiceBin, "./cmd/sluice"}, {kfakeBin, "./tools/kfakeserver"}} {
		if out, err := exec.Command("go", "-C", "..", "build", "-o", bin[0], bin[1]).CombinedOutput(); err != nil {
			b.Fatalf("build %s: %v\n%s", bin[1], err, out)
		}
	}
	type run struct {
		broker    string
		consumers int
		classic   bool
	}
	var runs []run
	for _, n := range []int{1, 4, 16} {
		runs = append(runs, run{"sluice", n, false}, run{"kfake-mem", n, false})
	}
	runs = append(runs, run{"sluice", 1, true}, run{"sluice", 4, true})
	name := func(r run) string {
		if r.classic {
			return fmt.Sprintf("%s/classic-group/%d", r.broker, r.consumers)
		}
		return fmt.Sprintf("%s/share/%d", r.broker, r.consumers)
	}
	rates, cpus := map[string][]float64{}, map[string][]float64{}
	for range b.N {
		for round := range shareBenchRounds {
			for _, r := range runs {
				rate, cpu := shareBenchRun(b, filepath.Join(dir, fmt.Sprint(round, name(r))), r.broker, sluiceBin, kfakeBin, r.consumers, r.classic)
				rates[name(r)] = append(rates[name(r)], rate)
				cpus[name(r)] = append(cpus[name(r)], cpu)
			}
		}
	}
	b.Logf("%-28s %12s %14s", "run", "records/s", "CPU µs/record")
	for _, r := range runs {
		n := name(r)
		rate, cpu := median(rates[n]), median(cpus[n])
		b.Logf("%-28s %12.0f %14.2f   (records/s %v)", n, rate, cpu, rounded(rates[n]))
		b.ReportMetric(rate, n+"-rec/s")
		b.ReportMetric(cpu, n+"-cpu-µs/rec")
	}
}

const (
	shareBenchRecords = 500000
	shareBenchRounds  = 3
)

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func rounded(xs []float64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

// shareBenchRun starts a broker process, loads the topic and consumes
// it; it returns records/s and the broker's CPU µs per record.
func shareBenchRun(b *testing.B, dir, broker, sluiceBin, kfakeBin string, consumers int, classic bool) (float64, float64) {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var cmd *exec.Cmd
	if broker == "sluice" {
		cmd = exec.Command(sluiceBin, "serve", "--data", dir, "--listen", addr, "--fsync", "always", "--http", "", "--schema-registry", "",
			"--share-auto-offset-reset", "earliest", "--log-level", "warn")
	} else {
		cmd = exec.Command(kfakeBin, "--port", fmt.Sprint(port))
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerLinger(5*time.Millisecond), kgo.RetryTimeout(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		if _, err := adm.CreateTopic(ctx, 4, 1, nil, "q"); err == nil {
			break
		} else if ctx.Err() != nil {
			b.Fatalf("%s: create topic: %v", broker, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	group := "g"
	if broker == "kfake-mem" && !classic {
		// kfake takes share.auto.offset.reset per group only.
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
		res.Configs = append(res.Configs, c)
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			b.Fatalf("kfake group config: %v %+v", err, resp)
		}
	}
	val := make([]byte, 100)
	var perr atomic.Value
	for i := range shareBenchRecords {
		cl.Produce(ctx, &kgo.Record{Topic: "q", Partition: int32(i % 4), Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil || perr.Load() != nil {
		b.Fatalf("%s: produce: %v %v", broker, err, perr.Load())
	}
	before, err := bench.ReadProc(cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var accepted atomic.Int64
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for range consumers {
		opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics("q"), kgo.FetchMaxWait(100 * time.Millisecond)}
		if classic {
			opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		} else {
			opts = append(opts, kgo.ShareGroup(group))
		}
		c, err := kgo.NewClient(opts...)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer c.Close()
			for cctx.Err() == nil {
				fs := c.PollFetches(cctx)
				n := 0
				fs.EachRecord(func(r *kgo.Record) {
					if !classic {
						r.Ack(kgo.AckAccept)
					}
					n++
				})
				if n == 0 {
					continue
				}
				if classic {
					if err := c.CommitUncommittedOffsets(cctx); err != nil {
						continue
					}
				} else if err := c.FlushAcks(cctx); err != nil {
					continue
				}
				if accepted.Add(int64(n)) >= shareBenchRecords {
					stop()
				}
			}
		})
	}
	<-cctx.Done()
	elapsed := time.Since(start)
	after, err := bench.ReadProc(cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	wg.Wait()
	if ctx.Err() != nil {
		b.Fatalf("%s: %d of %d records accepted before the timeout", broker, accepted.Load(), shareBenchRecords)
	}
	n := float64(accepted.Load())
	return n / elapsed.Seconds(), float64((after.CPU - before.CPU).Microseconds()) / n
}
