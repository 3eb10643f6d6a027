package integration

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerBinary builds the sluice binary of this tree (without the race
// detector, whatever the test's flags: its memory is what is measured).
func brokerBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.CommandContext(ctxT(t, 5*time.Minute), "go", "-C", "..", "build", "-o", bin, "./cmd/sluice")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sluice: %v\n%s", err, out)
	}
	return bin
}

// serveProc is `sluice serve` in its own process.
type serveProc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

var listeningRE = regexp.MustCompile(`sluice broker listening.*addr=(127\.0\.0\.1:\d+)`)

func startServe(t *testing.T, bin string, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--http", "", "--schema-registry", ""}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	select {
	case p.addr = <-addr:
	case <-p.done:
		t.Fatal("sluice serve exited before listening")
	case <-time.After(2 * time.Minute):
		t.Fatal("sluice serve did not listen within 2 minutes")
	}
	return p
}

// rss reads the process's resident set (VmRSS) and its anonymous part
// (RssAnon), in bytes.
func (p *serveProc) rss() (vm, anon int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return -1, -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			vm = kb << 10
		case "RssAnon:":
			anon = kb << 10
		}
	}
	return vm, anon
}

// overloadSeconds is the overload test's length: 60 s, or
// SLUICE_OVERLOAD_SECONDS.
func overloadSeconds(t *testing.T) time.Duration {
	if s := os.Getenv("SLUICE_OVERLOAD_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_OVERLOAD_SECONDS=%q: want a positive number", s)
		}
		return time.Duration(n) * time.Second
	}
	return 60 * time.Second
}

// TestOverload: 50 connections produce 1 MiB batches as fast as they can
// (more than the broker can write), while one synchronous producer writes
// 100 B records and a client asks for metadata twice a second. The
// broker, its own process without the race detector, keeps its resident
// memory under --queued-max-request-bytes plus a margin, answers every
// metadata request, keeps acknowledging the synchronous producer, and
// every acknowledged record is read back afterwards.
func TestOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of overload")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc to read the broker's memory")
	}
	bound := int64(128 << 20)
	// SLUICE_OVERLOAD_QUEUED_BYTES replaces the bound, to measure the
	// broker with a larger one (or, in effect, none).
	if s := os.Getenv("SLUICE_OVERLOAD_QUEUED_BYTES"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 100<<20 {
			t.Fatalf("SLUICE_OVERLOAD_QUEUED_BYTES=%q: want at least 104857600 (the largest request)", s)
		}
		bound = n
	}
	// The margin: the Go runtime and heap headroom (the collector lets
	// the heap grow past what is live before it runs), the
	// connections' buffers, the partitions' write-behind tails and the
	// frame pools.
	const margin = 128 << 20
	length := overloadSeconds(t)
	bin := brokerBinary(t)
	srv := startServe(t, bin, "--data", t.TempDir(), "--queued-max-request-bytes", strconv.FormatInt(bound, 10))
	baseVM, baseAnon := srv.rss()

	ctx, cancel := context.WithTimeout(context.Background(), length)
	defer cancel()
	var wg sync.WaitGroup

	// Memory, sampled every 100 ms.
	var maxVM, maxAnon atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for ctx.Err() == nil {
			vm, anon := srv.rss()
			if vm > maxVM.Load() {
				maxVM.Store(vm)
			}
			if anon > maxAnon.Load() {
				maxAnon.Store(anon)
			}
			<-tk.C
		}
	}()

	// The flood: 50 clients, one connection each, 1 MiB batches of
	// random 64 KiB records, as many in flight as franz-go allows.
	value := make([]byte, 64<<10)
	rand.Read(value)
	type acked struct {
		topic     string
		partition int32
		offset    int64
	}
	var ackMu sync.Mutex
	var acks []acked // guarded by ackMu
	var floodBytes atomic.Int64
	const flooders = 50
	for i := 0; i < flooders; i++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.addr), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(64),
			kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.AllowAutoTopicCreation(),
			kgo.RecordDeliveryTimeout(5*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		topic := fmt.Sprintf("flood-%d", i%10)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(r *kgo.Record, err error) {
					if err != nil {
						return
					}
					floodBytes.Add(int64(len(r.Value)))
					ackMu.Lock()
					acks = append(acks, acked{r.Topic, r.Partition, r.Offset})
					ackMu.Unlock()
				})
			}
		}()
	}

	// The synchronous producer.
	var lat []time.Duration
	var syncErrs []error
	syncCl, err := kgo.NewClient(kgo.SeedBrokers(srv.addr), kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("sync"))
	if err != nil {
		t.Fatal(err)
	}
	defer syncCl.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		small := make([]byte, 100)
		for ctx.Err() == nil {
			start := time.Now()
			r := &kgo.Record{Value: small}
			err := syncCl.ProduceSync(context.Background(), r).FirstErr()
			if err != nil {
				syncErrs = append(syncErrs, err)
				continue
			}
			lat = append(lat, time.Since(start))
			ackMu.Lock()
			acks = append(acks, acked{"sync", r.Partition, r.Offset})
			ackMu.Unlock()
		}
	}()

	// Metadata, twice a second, each with its own 30 s limit.
	var metaOK, metaFail atomic.Int64
	metaCl, err := kgo.NewClient(kgo.SeedBrokers(srv.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer metaCl.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(500 * time.Millisecond)
		defer tk.Stop()
		for ctx.Err() == nil {
			mctx, mcancel := context.WithTimeout(context.Background(), 30*time.Second)
			if _, err := kmsg.NewPtrMetadataRequest().RequestWith(mctx, metaCl); err != nil {
				metaFail.Add(1)
			} else {
				metaOK.Add(1)
			}
			mcancel()
			<-tk.C
		}
	}()
	started := time.Now()
	wg.Wait()
	took := time.Since(started)

	slices.Sort(lat)
	p := func(q float64) time.Duration {
		if len(lat) == 0 {
			return -1
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	t.Logf("overload for %v: flood acknowledged %.1f MiB/s over %d connections; broker VmRSS %d MiB at rest, max %d MiB (RssAnon %d -> %d MiB), bound %d MiB + margin %d MiB",
		took.Round(time.Second), float64(floodBytes.Load())/(1<<20)/took.Seconds(), flooders, baseVM>>20, maxVM.Load()>>20, baseAnon>>20, maxAnon.Load()>>20, bound>>20, margin>>20)
	t.Logf("synchronous 100 B producer: %d records, p50 %v, p99 %v, max %v; %d errors; metadata %d answered, %d failed",
		len(lat), p(0.5), p(0.99), p(1), len(syncErrs), metaOK.Load(), metaFail.Load())

	if m := maxVM.Load(); m > bound+margin {
		t.Errorf("broker RSS reached %d MiB, over the bound %d MiB + margin %d MiB", m>>20, bound>>20, margin>>20)
	}
	if metaFail.Load() != 0 || metaOK.Load() < int64(length/time.Second) {
		t.Errorf("metadata: %d answered, %d failed", metaOK.Load(), metaFail.Load())
	}
	if len(syncErrs) != 0 {
		t.Errorf("synchronous producer: %d errors, first %v", len(syncErrs), syncErrs[0])
	}
	// Bounded: each synchronous record waits behind at most the bytes
	// queued (the bound) at the rate the flood is acknowledged, with
	// room for a loaded machine.
	if len(lat) < 10 || p(0.99) > 30*time.Second {
		t.Errorf("synchronous producer: %d records, p99 %v", len(lat), p(0.99))
	}

	// Every acknowledged record is there.
	want := map[string]map[int64]bool{}
	ackMu.Lock()
	for _, a := range acks {
		k := fmt.Sprintf("%s/%d", a.topic, a.partition)
		if want[k] == nil {
			want[k] = map[int64]bool{}
		}
		want[k][a.offset] = true
	}
	ackMu.Unlock()
	for k, offs := range want {
		topic, part, _ := strings.Cut(k, "/")
		pn, _ := strconv.Atoi(part)
		hi := int64(-1)
		for o := range offs {
			hi = max(hi, o)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {int32(pn): kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxBytes(16<<20))
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Minute)
		for len(offs) > 0 && rctx.Err() == nil {
			fs := cl.PollFetches(rctx)
			fs.EachRecord(func(r *kgo.Record) {
				if r.Topic == topic && r.Partition == int32(pn) {
					delete(offs, r.Offset)
				}
			})
			if last := lastOffset(fs); last >= hi {
				break
			}
		}
		rcancel()
		cl.Close()
		if len(offs) != 0 {
			t.Errorf("%s: %d acknowledged records not read back", k, len(offs))
		}
	}
}

func lastOffset(fs kgo.Fetches) int64 {
	last := int64(-1)
	fs.EachRecord(func(r *kgo.Record) { last = max(last, r.Offset) })
	return last
}
