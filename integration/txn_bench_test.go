package integration

// Transactional throughput of Sluice against in-memory kfake, each broker
// in its own process (a re-executed test binary), with the same franz-go
// transactional client in this process:
//
//	go -C integration test . -run '^$' -bench Txn -benchtime 2000x -count 3
//
// Each benchmark writes b.N records of 100 B to one partition in
// transactions of 1, 10, 100 or 1000 records (Begin, pipelined Produce,
// EndTransaction commit; client linger 0), from 1, 16 or 64 concurrent
// transactional producers (one client and transactional id each), and
// reports records/s, the broker process's CPU time (utime+stime from
// /proc) per record and the bytes it passed to write system calls (files
// and sockets: wchar in /proc/PID/io) per record.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/bench"
)

const benchChildEnv = "SLUICE_BENCH_BROKER" // "sluice" or "kfake-mem"

// TestBenchBrokerChild is the child process of the transactional
// benchmarks: it serves one broker until SIGTERM. It does nothing in a
// normal test run.
func TestBenchBrokerChild(t *testing.T) {
	kind := os.Getenv(benchChildEnv)
	if kind == "" {
		t.Skip("only the benchmarks' child process runs this")
	}
	var addr string
	var stop func()
	switch kind {
	case "sluice":
		br, err := broker.New(broker.DataDir(os.Getenv(benchChildEnv+"_DIR")), broker.ListenAddr("127.0.0.1:0"))
		if err == nil {
			err = br.Start()
		}
		if err == nil {
			err = br.CreateTopic(context.Background(), benchTopic, 1, nil)
		}
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		addr, stop = br.Addr(), func() { br.Close() }
	case "kfake-mem":
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, benchTopic))
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		addr, stop = c.ListenAddrs()[0], c.Close
	default:
		fmt.Println("error unknown broker", kind)
		os.Exit(1)
	}
	// SLUICE_BENCH_BROKER_CPUPROFILE names a file for the child's CPU
	// profile (the whole life of the broker, warm-up included).
	if name := os.Getenv(benchChildEnv + "_CPUPROFILE"); name != "" {
		f, err := os.Create(name)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	// SLUICE_BENCH_BROKER_TRACE names a file for the child's execution
	// trace (runtime/trace), for `go tool trace -pprof=sched` and the like.
	if name := os.Getenv(benchChildEnv + "_TRACE"); name != "" {
		f, err := os.Create(name)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		defer f.Close()
		defer trace.Stop()
	}
	fmt.Println("listening", addr)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	<-ch
	stop()
}

// childBroker starts a broker of kind in a child process.
func childBroker(b *testing.B, kind string) (addr string, pid int, stop func()) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchBrokerChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), benchChildEnv+"="+kind, benchChildEnv+"_DIR="+b.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "listening" {
			addr = f[1]
			break
		}
	}
	if addr == "" {
		cmd.Process.Kill()
		cmd.Wait()
		b.Fatalf("%s child exited before listening", kind)
	}
	done := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(done)
	}()
	return addr, cmd.Process.Pid, func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		cmd.Wait()
	}
}

// procCPU returns a process's user+system CPU time.
func procCPU(b *testing.B, pid int) time.Duration {
	u, err := bench.ReadProc(pid)
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	return u.CPU
}

// procWritten returns the bytes a process handed to write system calls
// (wchar in /proc/PID/io: files and sockets), or -1 when unknown.
func procWritten(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// benchTxnProducers are the numbers of concurrent transactional
// producers each transaction size runs with.
var benchTxnProducers = []int{1, 16, 64}

func benchTxn(b *testing.B, size int) {
	for _, np := range benchTxnProducers {
		for _, kind := range []string{"sluice", "kfake-mem"} {
			b.Run(fmt.Sprintf("producers=%d/%s", np, kind), func(b *testing.B) {
				benchTxnRun(b, kind, size, np)
			})
		}
	}
}

// benchTxnRun runs np transactional producers (each a client of its own
// with a transactional id of its own) against a fresh broker of kind;
// together they commit transactions of size records, back to back, until
// at least b.N records are committed.
func benchTxnRun(b *testing.B, kind string, size, np int) {
	addr, pid, stop := childBroker(b, kind)
	defer stop()
	clients := make([]*kgo.Client, np)
	for i := range clients {
		// No linger: the client's 10 ms default would dominate small
		// transactions on both brokers alike.
		clients[i] = benchClient(b, addr, kgo.TransactionalID(fmt.Sprintf("bench-%s-%d-%d", kind, size, i)), kgo.ProducerLinger(0))
		defer clients[i].Close()
	}
	value := randomValue(100)
	ctx := context.Background()
	txn := func(cl *kgo.Client) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		var wg sync.WaitGroup
		var mu sync.Mutex // guards perr
		var perr error
		wg.Add(size)
		for i := 0; i < size; i++ {
			cl.Produce(ctx, &kgo.Record{Value: value, Partition: 0}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					perr = err
					mu.Unlock()
				}
				wg.Done()
			})
		}
		wg.Wait()
		if perr != nil {
			return perr
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	// run commits txns transactions, spread over the producers.
	run := func(txns int64) {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, np)
		for _, cl := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= txns {
					if err := txn(cl); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	// Warm up: every producer gets its producer id, coordinator and
	// connections, and commits one transaction.
	var wg sync.WaitGroup
	errs := make(chan error, np)
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := txn(cl); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	txns := (int64(b.N) + int64(size) - 1) / int64(size)
	records := txns * int64(size)
	cpu0, w0 := procCPU(b, pid), procWritten(pid)
	b.ResetTimer()
	start := time.Now()
	run(txns)
	el := time.Since(start)
	b.StopTimer()
	cpu, w1 := procCPU(b, pid)-cpu0, procWritten(pid)
	b.ReportMetric(float64(records)/el.Seconds(), "records/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(records), "broker-cpu-µs/record")
	if w0 >= 0 && w1 >= 0 {
		b.ReportMetric(float64(w1-w0)/float64(records), "broker-written-B/record")
	}
}

func BenchmarkTxn1(b *testing.B)    { benchTxn(b, 1) }
func BenchmarkTxn10(b *testing.B)   { benchTxn(b, 10) }
func BenchmarkTxn100(b *testing.B)  { benchTxn(b, 100) }
func BenchmarkTxn1000(b *testing.B) { benchTxn(b, 1000) }
