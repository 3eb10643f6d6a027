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

	"github.com/sluicedb/sluice/internal/vfs"
)

// walKillChildEnv, when set, turns TestWALKillMidLoad into the child: it
// appends to walKillParts partitions sharing a WAL under that directory
// until killed.
const walKillChildEnv = "SLUICE_ACCEPTOR_WAL_KILL_CHILD_DIR"

// walKillWriteBehindEnv passes walWriteBehind to the child.
const walKillWriteBehindEnv = "SLUICE_ACCEPTOR_WAL_KILL_CHILD_WRITE_BEHIND"

const walKillParts = 16

// TestWALKillMidLoad re-executes the test binary as a child that appends
// to sixteen partitions sharing a WAL from several goroutines and prints
// "ack <i> <partition> <base>" after each durable acknowledgement. The
// parent kills it with SIGKILL mid-load, replays the WAL into the logs as
// a broker start does, and checks that every acknowledged append is
// there byte for byte with contiguous offsets. With a write-behind tail,
// the kill loses the tails' bytes, which the replay restores.
func TestWALKillMidLoad(t *testing.T) {
	if dir := os.Getenv(walKillChildEnv); dir != "" {
		wb, err := strconv.Atoi(os.Getenv(walKillWriteBehindEnv))
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: bad", walKillWriteBehindEnv, err)
			os.Exit(2)
		}
		walWriteBehind = wb
		walKillChild(dir)
		return
	}
	eachWriteBehind(t, walKillMidLoad)
}

func walKillMidLoad(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL is not available on windows")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWALKillMidLoad$", "-test.count=1")
	cmd.Env = append(os.Environ(), walKillChildEnv+"="+dir, walKillWriteBehindEnv+"="+strconv.Itoa(walWriteBehind))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	res := walWorkload{acks: make([][]acked, walKillParts), hw: make([]int64, walKillParts)}
	sc := bufio.NewScanner(out)
	killed, n := false, 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "ack" {
			continue // test framework chatter
		}
		i, err1 := strconv.Atoi(f[1])
		p, err2 := strconv.Atoi(f[2])
		base, err3 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || p < 0 || p >= walKillParts {
			t.Fatalf("bad line from child: %q", sc.Text())
		}
		res.acks[p] = append(res.acks[p], acked{i: i, base: base, orig: multiSpec(i).bytes(i), durable: true})
		if n++; !killed && n >= 800 {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended before it was killed (%d acks): %v", n, err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed by SIGKILL: %v", err)
	}
	recoverWAL(t, vfs.OS(), dir, walKillParts, res)
	t.Logf("%d acknowledged appends over %d partitions survived SIGKILL", n, walKillParts)
}

// walKillChild is the child of TestWALKillMidLoad. It never returns
// normally: the parent kills it (or it exits after a bound, failing the
// parent).
func walKillChild(dir string) {
	_, _, accs, _, err := openWALParts(vfs.OS(), dir, walKillParts, Config{BufferSize: 32 << 10, RetentionCheck: -1, WALMaxCycle: 4 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(2)
	}
	var outMu sync.Mutex // serializes ack lines
	out := bufio.NewWriter(os.Stdout)
	next := make(chan int)
	for range 16 {
		go func() {
			for i := range next {
				p := i % walKillParts
				orig := multiSpec(i).bytes(i)
				res, err := accs[p].Append(context.Background(), &Request{Batches: orig, Headers: mustHeaders(orig), Durable: true})
				if err != nil {
					fmt.Fprintln(os.Stderr, "child: append:", err)
					os.Exit(2)
				}
				outMu.Lock()
				fmt.Fprintf(out, "ack %d %d %d\n", i, p, res.BaseOffset)
				out.Flush() // the line reaches the pipe only after the append is durable
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
