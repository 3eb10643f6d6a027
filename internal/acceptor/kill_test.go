package acceptor

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
)

// killChildEnv, when set in the environment, turns TestKillMidLoad into
// the child: it appends to the log in that directory until killed.
const killChildEnv = "SLUICE_ACCEPTOR_KILL_CHILD_DIR"

// killSpec is the i-th append of the child's load; the parent rebuilds it
// to check the bytes.
func killSpec(i int) spec {
	s := spec{records: 1 + i%3, valueSize: 200 + (i*7919)%3000, durable: true, seed: byte(i)}
	if i%17 == 0 {
		s.valueSize = 40000 // larger than the child's 32 KiB buffer
	}
	return s
}

// TestKillMidLoad re-executes the test binary as a child that appends
// from several goroutines and prints "ack <i> <base>" after each durable
// acknowledgement. The parent kills it with SIGKILL mid-load, reopens the
// log and checks that every acknowledged append is there byte for byte.
func TestKillMidLoad(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL is not available on windows")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillMidLoad$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acks := map[int]int64{}
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "ack" {
			continue // test framework chatter
		}
		i, err1 := strconv.Atoi(f[1])
		base, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad line from child: %q", sc.Text())
		}
		acks[i] = base
		if !killed && len(acks) >= 400 {
			// Kill mid-load; keep reading: lines already in the pipe
			// were printed after their append was durable.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended before it was killed (%d acks): %v", len(acks), err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed by SIGKILL: %v", err)
	}

	var list []acked
	for i, base := range acks {
		list = append(list, acked{i: i, base: base, orig: killSpec(i).bytes(i), durable: true})
	}
	checkAckOrder(t, list)
	l, err := storage.Open(vfs.OS(), dir, crashStorage)
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	rep := l.Recovery()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	verifyRecovered(t, vfs.OS(), dir, list, 0)
	t.Logf("%d acknowledged appends survived SIGKILL; recovery: %+v", len(list), rep)
}

// killChild is the child of TestKillMidLoad. It never returns normally:
// the parent kills it (or it exits after a bound, failing the parent).
func killChild(dir string) {
	l, err := storage.Open(vfs.OS(), dir, crashStorage)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(2)
	}
	a := Start(l, Config{BufferSize: 32 << 10, RetentionCheck: -1})
	var outMu sync.Mutex // serializes ack lines
	w := bufio.NewWriter(os.Stdout)
	next := make(chan int)
	for range 8 {
		go func() {
			for i := range next {
				orig := killSpec(i).bytes(i)
				res, err := a.Append(context.Background(), &Request{Batches: orig, Headers: mustHeaders(orig), Durable: true})
				if err != nil {
					fmt.Fprintln(os.Stderr, "child: append:", err)
					os.Exit(2)
				}
				outMu.Lock()
				fmt.Fprintf(w, "ack %d %d\n", i, res.BaseOffset)
				w.Flush() // the line reaches the pipe only after the append is durable
				outMu.Unlock()
			}
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for i := 0; time.Now().Before(deadline); i++ {
		next <- i
	}
	fmt.Fprintln(os.Stderr, "child: not killed within a minute")
	os.Exit(3)
}
