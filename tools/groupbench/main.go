// Command groupbench measures consumer-group rebalances: how long a group
// of N franz-go members takes to reach a stable assignment of a topic,
// and the pause the remaining members see when one of them leaves, with
// the classic protocol (eager range assignor, a rebalance stops every
// member) and with KIP-848's consumer protocol (kgo.ServerSideBalancer),
// against Sluice and in-memory kfake, each broker in a process of its
// own started fresh for every run, the runs interleaved, and prints a
// Markdown table of medians with the broker's CPU time (utime+stime from
// /proc) over the join and the leave.
//
//	go build -o bin/sluice ./cmd/sluice
//	go build -o bin/kfakeserver ./tools/kfakeserver
//	go run ./tools/groupbench --sluice bin/sluice --kfake bin/kfakeserver --members 100 --rounds 3
//
// Both brokers give consumer-protocol members the same heartbeat
// interval (--heartbeat), and classic members heartbeat at it too, so
// the figures compare the protocols and the brokers, not their defaults.
//
// Members start one heartbeat interval / N apart, so their heartbeats
// are spread over the interval as those of independently started members
// are (in lockstep they would all learn of a rebalance at once).
//
// Stable: every partition is owned by exactly one member and every
// member owns its share (partitions/members, rounded down, or one more).
// The leave's pause is, over the remaining members, the longest time one
// of them held none of the partitions it owned before the leave
// (revoked and not yet given back); members that keep their partitions
// throughout pause 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/bench"
)

type brokerKind struct {
	name  string
	start func(dir string, port int) *exec.Cmd
}

type result struct {
	join, settle, pause time.Duration // to stable; leave to stable again; the remaining members' longest pause
	joinCPU, leaveCPU   time.Duration // the broker's CPU over the join and over the leave
}

func main() {
	sluiceBin := flag.String("sluice", "", "sluice binary (go build ./cmd/sluice)")
	kfakeBin := flag.String("kfake", "", "kfakeserver binary (go build ./tools/kfakeserver)")
	members := flag.Int("members", 100, "members of the group")
	partitions := flag.Int("partitions", 200, "partitions of the topic")
	rounds := flag.Int("rounds", 3, "runs of each pairing (interleaved)")
	heartbeat := flag.Duration("heartbeat", 500*time.Millisecond, "heartbeat interval of every member, both protocols")
	limit := flag.Duration("limit", 5*time.Minute, "give up on a run after this long")
	flag.Parse()
	if *sluiceBin == "" || *kfakeBin == "" {
		fmt.Fprintln(os.Stderr, "groupbench: --sluice and --kfake are required")
		os.Exit(2)
	}
	hbMs := fmt.Sprint(heartbeat.Milliseconds())
	kinds := []brokerKind{
		{"sluice", func(dir string, port int) *exec.Cmd {
			cmd := exec.Command(*sluiceBin, "serve", "--data", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--http", "",
				"--group-consumer-min-heartbeat-interval", heartbeat.String(), "--group-consumer-heartbeat-interval", heartbeat.String())
			cmd.Env = append(os.Environ(), "SLUICE_SCHEMA_REGISTRY=")
			return cmd
		}},
		{"kfake-mem", func(_ string, port int) *exec.Cmd {
			return exec.Command(*kfakeBin, "--port", fmt.Sprint(port), "--broker-config", "group.consumer.heartbeat.interval.ms="+hbMs)
		}},
	}
	protocols := []string{"classic", "consumer"}
	res := map[string][]result{}
	for r := range *rounds {
		for _, p := range protocols {
			for _, k := range kinds {
				key := k.name + "/" + p
				out, err := runOne(k, p, *members, int32(*partitions), *heartbeat, *limit)
				if err != nil {
					fmt.Fprintf(os.Stderr, "groupbench: round %d %s: %v\n", r+1, key, err)
					os.Exit(1)
				}
				fmt.Fprintf(os.Stderr, "round %d %-18s join %v (cpu %v) leave: settle %v pause %v (cpu %v)\n",
					r+1, key, out.join.Round(time.Millisecond), out.joinCPU, out.settle.Round(time.Millisecond), out.pause.Round(time.Millisecond), out.leaveCPU)
				res[key] = append(res[key], out)
			}
		}
	}
	fmt.Printf("| broker | protocol | %d members: to stable | broker CPU | one leaves: to stable | longest pause of the others | broker CPU |\n", *members)
	fmt.Println("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, p := range protocols {
		for _, k := range kinds {
			rs := res[k.name+"/"+p]
			fmt.Printf("| %s | %s | %v | %v | %v | %v | %v |\n", k.name, p,
				median(rs, func(r result) time.Duration { return r.join }),
				median(rs, func(r result) time.Duration { return r.joinCPU }),
				median(rs, func(r result) time.Duration { return r.settle }),
				median(rs, func(r result) time.Duration { return r.pause }),
				median(rs, func(r result) time.Duration { return r.leaveCPU }))
		}
	}
}

func median(rs []result, f func(result) time.Duration) time.Duration {
	v := make([]time.Duration, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2].Round(time.Millisecond)
}

// tracker follows which member owns which partition, from the members'
// assignment callbacks.
type tracker struct {
	mu      sync.Mutex // guards the fields below
	owned   []map[int32]bool
	alive   []bool
	leaveAt time.Time        // zero until a member leaves
	before  []map[int32]bool // what each member owned at the leave
	emptyAt []time.Time      // when a member came to hold none of before; zero when it holds some
	pause   time.Duration    // longest such time, once ended
	changed chan struct{}    // closed and replaced on every change
}

func newTracker(n int) *tracker {
	t := &tracker{owned: make([]map[int32]bool, n), alive: make([]bool, n), emptyAt: make([]time.Time, n), changed: make(chan struct{})}
	for i := range t.owned {
		t.owned[i], t.alive[i] = map[int32]bool{}, true
	}
	return t
}

func (t *tracker) update(i int, ps []int32, add bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range ps {
		if add {
			t.owned[i][p] = true
		} else {
			delete(t.owned[i], p)
		}
	}
	if !t.leaveAt.IsZero() && t.alive[i] && len(t.before[i]) > 0 {
		keeps := false
		for p := range t.before[i] {
			if t.owned[i][p] {
				keeps = true
				break
			}
		}
		switch {
		case !keeps && len(t.owned[i]) == 0 && t.emptyAt[i].IsZero():
			t.emptyAt[i] = time.Now()
		case len(t.owned[i]) > 0 && !t.emptyAt[i].IsZero():
			t.pause = max(t.pause, time.Since(t.emptyAt[i]))
			t.emptyAt[i] = time.Time{}
		}
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// stable reports whether every partition is owned once and every live
// member owns its share.
func (t *tracker) stableLocked(partitions int32) bool {
	live := 0
	for _, a := range t.alive {
		if a {
			live++
		}
	}
	seen := map[int32]bool{}
	lo := int(partitions) / live
	for i, o := range t.owned {
		if !t.alive[i] {
			continue
		}
		if len(o) < lo || len(o) > lo+1 {
			return false
		}
		for p := range o {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == int(partitions)
}

func (t *tracker) waitStable(ctx context.Context, partitions int32) error {
	for {
		t.mu.Lock()
		ok, ch := t.stableLocked(partitions), t.changed
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("group not stable: %w", ctx.Err())
		}
	}
}

func runOne(k brokerKind, protocol string, n int, partitions int32, heartbeat, limit time.Duration) (result, error) {
	var res result
	dir, err := os.MkdirTemp("", "groupbench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	port, err := bench.FreePort()
	if err != nil {
		return res, err
	}
	cmd := k.start(filepath.Join(dir, "data"), port)
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer bench.StopProcess(cmd, 20*time.Second)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := bench.WaitListening(addr, 20*time.Second); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return res, err
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, partitions, 1, nil, "groupbench"); err != nil {
		return res, fmt.Errorf("create topic: %w", err)
	}

	tr := newTracker(n)
	clients := make([]*kgo.Client, n)
	var polls sync.WaitGroup
	pollCtx, stopPolls := context.WithCancel(context.Background())
	defer func() {
		stopPolls()
		polls.Wait()
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	cpu0, err := bench.ReadProc(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	start := time.Now()
	for i := range clients {
		opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup("groupbench"), kgo.ConsumeTopics("groupbench"),
			kgo.HeartbeatInterval(heartbeat), kgo.SessionTimeout(45 * time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.update(i, m["groupbench"], true) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.update(i, m["groupbench"], false) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tr.update(i, m["groupbench"], false) }),
		}
		if protocol == "consumer" {
			opts = append(opts, kgo.ServerSideBalancer())
		} else {
			opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return res, err
		}
		clients[i] = cl
		// Spread the members' heartbeats over one interval, as members
		// started independently are, rather than in lockstep.
		time.Sleep(heartbeat / time.Duration(n))
		polls.Add(1)
		go func() {
			defer polls.Done()
			for pollCtx.Err() == nil {
				if fs := cl.PollFetches(pollCtx); fs.IsClientClosed() {
					return
				}
			}
		}()
	}
	if err := tr.waitStable(ctx, partitions); err != nil {
		return res, fmt.Errorf("join: %w", err)
	}
	res.join = time.Since(start)
	cpu1, err := bench.ReadProc(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	res.joinCPU = cpu1.CPU - cpu0.CPU

	// One member leaves.
	tr.mu.Lock()
	tr.leaveAt = time.Now()
	tr.before = make([]map[int32]bool, n)
	for i, o := range tr.owned {
		tr.before[i] = map[int32]bool{}
		for p := range o {
			tr.before[i][p] = true
		}
	}
	tr.alive[0] = false
	tr.mu.Unlock()
	leave := time.Now()
	clients[0].Close()
	clients[0] = nil
	if err := tr.waitStable(ctx, partitions); err != nil {
		return res, fmt.Errorf("after the leave: %w", err)
	}
	res.settle = time.Since(leave)
	tr.mu.Lock()
	res.pause = tr.pause
	for i, at := range tr.emptyAt {
		if tr.alive[i] && !at.IsZero() {
			res.pause = max(res.pause, time.Since(at))
		}
	}
	tr.mu.Unlock()
	cpu2, err := bench.ReadProc(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	res.leaveCPU = cpu2.CPU - cpu1.CPU
	return res, nil
}
