package mirror

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

	"github.com/twmb/franz-go/pkg/kgo"
)

// killChildEnv, when set ("FROM;TO", each a comma-separated address
// list), turns TestKillRestart into the child: a tailing mirror that
// prints "progress N" after each interval until it is killed.
const killChildEnv = "SLUICE_MIRROR_KILL_CHILD"

// TestKillRestart runs the mirror as a re-executed child and kills it
// with SIGKILL mid-copy, again and again, while a producer keeps writing
// to the source; a final --once run must leave the target equal to the
// source: every record, in order, none twice.
func TestKillRestart(t *testing.T) {
	if spec := os.Getenv(killChildEnv); spec != "" {
		killChild(spec)
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL is not available on windows")
	}
	for _, d := range directions {
		t.Run(d.name, func(t *testing.T) {
			src, tgt := d.from(t), d.to(t)
			const topic = "stream"
			createTopic(t, src, topic, 4, nil)

			// A producer writing until stopped, 40 records per progress
			// line of the child (so the source grows with the copy rather
			// than as fast as an in-memory broker takes records).
			pc := produceClient(t, src)
			stop := make(chan struct{})
			pace := make(chan struct{}, 1)
			var wg sync.WaitGroup
			wg.Add(1)
			var produced int
			go func() {
				defer wg.Done()
				for i := 0; ; i += 40 {
					select {
					case <-stop:
						return
					case <-pace:
					}
					var recs []*kgo.Record
					for j := i; j < i+40; j++ {
						recs = append(recs, testRecord(topic, int32(j%4), j))
					}
					if err := pc.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
						t.Errorf("produce: %v", err)
						return
					}
					produced = i + 40
				}
			}()

			for round := range 5 {
				killMirrorChild(t, src, tgt, round, pace)
			}
			close(stop)
			wg.Wait()

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rep := runMirror(t, ctx, Config{From: src.addrs, To: tgt.addrs, Once: true, Logger: quietLogger()})
			if !rep.Resumed {
				t.Error("the final run found no stored position")
			}
			n := equalTopics(t, src, tgt, topic)
			if n != produced {
				t.Errorf("%d records on both sides, %d produced", n, produced)
			}
			t.Logf("%d records equal on both sides after 5 kills; the final run copied %d", n, rep.Records)
		})
	}
}

// killMirrorChild starts a mirror child and kills it once it has copied
// 100 × (round+1) records, mid-way through later batches.
func killMirrorChild(t *testing.T, src, tgt cluster, round int, pace chan<- struct{}) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillRestart$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+strings.Join(src.addrs, ",")+";"+strings.Join(tgt.addrs, ","))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	seen, killed := 0, false // seen: progress lines with records copied
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || f[0] != "progress" {
			continue // test framework chatter
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("bad line from child: %q", sc.Text())
		}
		if n > 0 {
			seen++
		}
		select {
		case pace <- struct{}{}:
		default:
		}
		// Kill after some commits: more of them each round.
		if !killed && n >= int64(100*(round+1)) {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("round %d: child ended before it was killed (%d progress lines with records): %v", round, seen, err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("round %d: child was not killed by SIGKILL: %v", round, err)
	}
}

// killChild is the child of TestKillRestart: it mirrors until killed (or
// exits after a bound, failing the parent).
func killChild(spec string) {
	from, to, _ := strings.Cut(spec, ";")
	w := bufio.NewWriter(os.Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Run(ctx, Config{
		From: strings.Split(from, ","), To: strings.Split(to, ","),
		Interval: 2 * time.Millisecond, MaxBatch: 30, Logger: quietLogger(),
		Progress: func(s Stats) {
			fmt.Fprintf(w, "progress %d\n", s.Records)
			w.Flush()
		},
	})
	fmt.Fprintln(os.Stderr, "child: not killed within a minute:", err)
	os.Exit(3)
}
