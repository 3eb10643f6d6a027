package integration

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
)

// shareChild are the share-group settings of the child broker
// (killChild): share groups read from the earliest offset, and members
// heartbeat often, so that they rejoin quickly after each restart.
var shareChild = broker.ShareGroups(broker.ShareGroupSettings{AutoOffsetReset: "earliest", HeartbeatInterval: 300 * time.Millisecond})

// TestShareGroupKill9: four kgo share consumers accept records from a
// two-partition topic under continuous production while the broker, in
// a child process, is killed with SIGKILL and restarted five times.
// Afterwards every produced record was delivered and the group settled
// every offset (its lag is 0), no record was delivered again after its
// ACCEPT was answered, and every redelivery is of a record whose
// acknowledgement was not answered when the broker died.
func TestShareGroupKill9(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL is not available on windows")
	}
	if testing.Short() {
		t.Skip("kill -9 test skipped in -short mode")
	}
	const topic, group, kills = "share-kill", "share-kill-group", 5
	dir := t.TempDir()
	p := startBrokerProc(t, dir, "127.0.0.1:0")
	addr := p.addr
	t.Cleanup(func() {
		if p != nil {
			p.cmd.Process.Signal(syscall.SIGTERM)
			<-p.done
		}
	})
	ctx := ctxT(t, 300*time.Second)
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	admCl.Close()

	type key struct {
		p int32
		o int64
	}
	var (
		mu        sync.Mutex
		produced  = map[string]bool{}
		accepted  = map[key]string{} // ACCEPT answered: offset → value
		seen      = map[string]bool{}
		acceptedV = map[string]bool{}
		redeliver int
		violation []string
	)
	// The producer: one record at a time, kgo retrying across restarts.
	stopProd := make(chan struct{})
	prodDone := make(chan struct{})
	pcl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordRetries(1<<30), kgo.RecordDeliveryTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	go func() {
		defer close(prodDone)
		for i := 0; ; i++ {
			select {
			case <-stopProd:
				return
			default:
			}
			v := fmt.Sprintf("r%05d", i)
			if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
				if ctx.Err() != nil {
					return
				}
				continue // not acknowledged: may or may not exist
			}
			mu.Lock()
			produced[v] = true
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for c := range 4 {
		var ackFailed atomic.Bool
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
			kgo.FetchMaxWait(500*time.Millisecond), kgo.ClientID(fmt.Sprintf("c%d", c)),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				if rs.Error() != nil {
					ackFailed.Store(true)
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Go(func() {
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				var polled []*kgo.Record
				fs.EachRecord(func(r *kgo.Record) { polled = append(polled, r) })
				if len(polled) == 0 {
					continue
				}
				mu.Lock()
				for _, r := range polled {
					k := key{r.Partition, r.Offset}
					if v, ok := accepted[k]; ok {
						// The value delivered now tells a lost acknowledgement
						// (the same record again) from a lost record (another
						// one at a reused offset).
						violation = append(violation, fmt.Sprintf("%s at %d/%d delivered again as %s (count %d) after its ACCEPT was answered", v, k.p, k.o, r.Value, r.DeliveryCount()))
					}
					if r.DeliveryCount() > 1 {
						redeliver++
					}
					seen[string(r.Value)] = true
				}
				mu.Unlock()
				ackFailed.Store(false)
				for _, r := range polled {
					r.Ack(kgo.AckAccept)
				}
				if err := cl.FlushAcks(cctx); err != nil || ackFailed.Load() {
					continue // not answered: the records may come back
				}
				mu.Lock()
				for _, r := range polled {
					accepted[key{r.Partition, r.Offset}] = string(r.Value)
					acceptedV[string(r.Value)] = true
				}
				mu.Unlock()
			}
		})
	}
	waitSeen := func(n int) {
		t.Helper()
		for {
			mu.Lock()
			got := len(seen)
			mu.Unlock()
			if got >= n {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("timed out: %d records seen, want %d", got, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for k := range kills {
		waitSeen(200 * (k + 1))
		p.kill(t)
		p = startBrokerProc(t, dir, addr)
	}
	close(stopProd)
	<-prodDone
	mu.Lock()
	want := len(produced)
	mu.Unlock()
	// Every acknowledged production is delivered, and the group settles
	// every offset (nothing is rejected here, so settled is accepted): an
	// ACCEPT made durable just before a kill is never answered, and its
	// record, rightly, never comes back.
	acl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	unsettled := func() (int64, error) {
		o, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err != nil {
			return 0, err
		}
		if err := o[group].Err; err != nil {
			return 0, err
		}
		var lag int64
		n := 0
		for _, ps := range o[group].Offsets {
			for _, p := range ps {
				if p.Err != nil {
					return 0, p.Err
				}
				lag += p.Lag
				n++
			}
		}
		if n != 2 {
			return 0, fmt.Errorf("offsets of %d partitions, want 2", n)
		}
		return lag, nil
	}
	var missing, unanswered int
	for {
		mu.Lock()
		missing, unanswered = 0, 0
		for v := range produced {
			if !seen[v] {
				missing++
			} else if !acceptedV[v] {
				unanswered++
			}
		}
		mu.Unlock()
		lag, err := unsettled()
		if missing == 0 && err == nil && lag == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d produced records never delivered; share group lag %d (%v)", missing, want, lag, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, v := range violation {
		t.Error(v)
	}
	t.Logf("%d records produced and accepted over %d kills (%d of them accepted durably without the answer reaching the consumer); %d deliveries were redeliveries of records not acknowledged when the broker died", want, kills, unanswered, redeliver)
}

// TestShareDocCommands runs the commands of docs/share-groups.md: a
// released record comes back and is accepted with the rest.
func TestShareDocCommands(t *testing.T) {
	n := startNode(t, broker.ShareGroups(broker.ShareGroupSettings{AutoOffsetReset: "earliest"}))
	out := runDocCommands(t, n, docBlock(t, "docs/share-groups.md", "share-doc-commands"))
	released := 0
	for _, want := range []string{"accepted a\naccepted b\naccepted c\naccepted d\n", "workers", "share", "PROTOCOL  share/simple", "TOPIC  PARTITION  START  END  LAG"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, v := range []string{"a", "b", "c", "d"} {
		if strings.Contains(out, "released "+v+"\n") {
			released++
		}
	}
	if released != 1 {
		t.Errorf("%d records released, want 1:\n%s", released, out)
	}
	// group describe: both partitions settled up to their ends, 4 records in all.
	rows := regexp.MustCompile(`(?m)^jobs +([01]) +(\d+) +(\d+) +(\d+)$`).FindAllStringSubmatch(out, -1)
	sum := 0
	for _, r := range rows {
		if r[2] != r[3] || r[4] != "0" {
			t.Errorf("partition %s: start %s, end %s, lag %s; want start = end, lag 0", r[1], r[2], r[3], r[4])
		}
		n, _ := strconv.Atoi(r[3])
		sum += n
	}
	if len(rows) != 2 || sum != 4 {
		t.Errorf("group describe rows %v, want two partitions ending at 4 records in all:\n%s", rows, out)
	}
}
