package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
)

// killChildEnv, when set, turns TestEOSKill9 into the child: a broker on
// that data directory and the address in killAddrEnv, serving until it is
// killed.
const (
	killChildEnv = "SLUICE_TXN_KILL_CHILD_DIR"
	killAddrEnv  = "SLUICE_TXN_KILL_CHILD_ADDR"
)

func killChild(dir, addr string) {
	b, err := broker.New(broker.DataDir(dir), broker.ListenAddr(addr), shareChild)
	if err == nil {
		err = b.Start()
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("listening", b.Addr())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	<-ch // SIGKILL ends the process before this; SIGTERM closes cleanly
	b.Close()
	os.Exit(0)
}

// brokerProc is a broker running in a child process.
type brokerProc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

func startBrokerProc(t *testing.T, dir, addr string) *brokerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEOSKill9$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir, killAddrEnv+"="+addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &brokerProc{cmd: cmd, done: make(chan struct{})}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "listening" {
			p.addr = f[1]
			break
		}
		if len(f) > 0 && f[0] == "error" {
			t.Fatalf("child broker: %s", sc.Text())
		}
	}
	if p.addr == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("child broker exited before listening")
	}
	go func() {
		for sc.Scan() {
		}
		cmd.Wait()
		close(p.done)
	}()
	return p
}

func (p *brokerProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// TestEOSKill9 runs the exactly-once pipeline of
// TestEOSGroupTransactSession (two members) against a broker in a child
// process and kills that process with SIGKILL several times mid-pipeline,
// restarting it on the same data directory and address. Afterwards the
// output, read read_committed, holds every input record exactly once and
// the group's committed offsets cover the whole input.
func TestEOSKill9(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir, os.Getenv(killAddrEnv))
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL is not available on windows")
	}
	if testing.Short() {
		t.Skip("kill -9 test skipped in -short mode")
	}
	const in, out, group, total, kills = "kill-in", "kill-out", "kill-group", 3000, 3
	dir := t.TempDir()
	p := startBrokerProc(t, dir, "127.0.0.1:0")
	addr := p.addr
	t.Cleanup(func() {
		if p != nil {
			p.cmd.Process.Signal(syscall.SIGTERM)
			<-p.done
		}
	})
	ctx := ctxT(t, 240*time.Second)
	{
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(cl)
		if _, err := adm.CreateTopic(ctx, 4, 1, nil, in); err != nil {
			t.Fatal(err)
		}
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, out); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}
	produceValues(t, addr, in, 0, total)

	var committed, ends atomic.Int64
	wctx, cancel := context.WithCancel(ctx)
	var stops []chan struct{}
	for i := 1; i <= 2; i++ {
		done := make(chan struct{})
		stops = append(stops, done)
		w := &eosWorker{addr: addr, txnID: fmt.Sprintf("kill-member-%d", i), group: group, in: in, out: out, committed: &committed,
			ends: &ends, logf: func(string, ...any) {}}
		go func() { defer close(done); w.run(wctx) }()
	}
	stopWorkers := func() {
		cancel()
		for _, d := range stops {
			<-d
		}
	}
	defer stopWorkers()

	tk := time.NewTicker(10 * time.Millisecond)
	defer tk.Stop()
	for k := 1; k <= kills; k++ {
		target := int64(total * k / (kills + 2))
		for committed.Load() < target {
			select {
			case <-ctx.Done():
				t.Fatalf("kill %d: pipeline committed %d of %d", k, committed.Load(), target)
			case <-tk.C:
			}
		}
		p.kill(t)
		t.Logf("kill %d after %d committed records", k, committed.Load())
		p = startBrokerProc(t, dir, addr)
	}
	// Let the pipeline finish: the group's offsets reach the input's end.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		ends, err1 := adm.ListEndOffsets(ctx, in)
		offs, err2 := adm.FetchOffsets(ctx, group)
		if err1 == nil && err2 == nil {
			lag := int64(0)
			ends.Each(func(o kadm.ListedOffset) {
				c, ok := offs.Lookup(in, o.Partition)
				if !ok || c.At < 0 {
					lag += o.Offset
				} else {
					lag += o.Offset - c.At
				}
			})
			if lag == 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pipeline did not finish: %v %v", err1, err2)
		case <-tk.C:
		}
	}
	stopWorkers()
	checkExactlyOnce(t, addr, group, in, out, total)
	// franz-go ran transaction version 2 (the broker finalizes it): every
	// EndTxn bumped the epoch, so the kills hit implicit partition adds
	// and epoch bumps. On the classic protocol only InitProducerId would
	// (once per session, a handful of times).
	txns, err := adm.DescribeTransactions(ctx, "kill-member-1", "kill-member-2")
	if err != nil {
		t.Fatal(err)
	}
	epochs := 0
	txns.Each(func(d kadm.DescribedTransaction) { epochs += int(d.ProducerEpoch) })
	if n := ends.Load(); n < 20 || int64(epochs) < n/2 {
		t.Fatalf("%d transactions ended, epochs sum to %d: transaction version 2 was not used", n, epochs)
	}
}
