package broker

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

// BenchmarkCloseManyPartitions times Broker.Close of a broker whose one
// topic of n partitions each received records (150 per partition, as in
// 300,000 records over 2,000 partitions), on the operating system's
// filesystem, and counts the syncs (file fsyncs, directory fsyncs,
// filesystem syncs) and the files created and removed during the close.
// The broker is closed four times, each after writing as much: first
// after the topic was created (first-*: every file of a clean close is
// new), the last (close-*, the timed one) after three restarts, the
// steady state of a broker restarted now and then. The directory is then reopened once more (reopen-ms: New,
// which opens every partition; reopened-clean: partitions whose active
// segment was not scanned).
//
// The data directory is under SLUICE_BENCH_DIR when set (a directory on
// the disk to measure), else under the test's temporary directory. Run
// one round per size:
//
//	go test ./broker -run '^$' -bench CloseManyPartitions -benchtime 1x
func BenchmarkCloseManyPartitions(b *testing.B) {
	for _, n := range []int{100, 2000, 8000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			var r closeRun
			for b.Loop() {
				r.add(closeManyPartitions(b, n, 150))
			}
			k := float64(b.N)
			for _, m := range []struct {
				v    float64
				unit string
			}{
				{float64(r.first.d.Milliseconds()), "first-close-ms"},
				{float64(r.first.c.syncs()), "first-close-syncs"},
				{float64(r.first.c.creates.Load()), "first-close-creates"},
				{float64(r.second.d.Milliseconds()), "close-ms"},
				{float64(r.second.c.syncs()), "close-syncs"},
				{float64(r.second.c.creates.Load()), "close-creates"},
				{float64(r.second.c.removes.Load()), "close-removes"},
				{float64(r.reopen.Milliseconds()), "reopen-ms"},
				{float64(r.clean), "reopened-clean"},
			} {
				b.ReportMetric(m.v/k, m.unit)
			}
		})
	}
}

// closeRounds is how many times closeManyPartitions writes and closes
// the broker: the last close is the steady state of a broker restarted
// now and then (each partition keeps three producer snapshots).
const closeRounds = 4

// closeRun sums the measurements of closeManyPartitions.
type closeRun struct {
	first, second closeStat
	reopen        time.Duration
	clean         int
}

type closeStat struct {
	d time.Duration
	c fsCounts
}

func (r *closeRun) add(o *closeRun) {
	for _, p := range []struct{ to, from *closeStat }{{&r.first, &o.first}, {&r.second, &o.second}} {
		p.to.d += p.from.d
		p.to.c.fileSyncs.Add(p.from.c.fileSyncs.Load())
		p.to.c.dirSyncs.Add(p.from.c.dirSyncs.Load())
		p.to.c.fsSyncs.Add(p.from.c.fsSyncs.Load())
		p.to.c.creates.Add(p.from.c.creates.Load())
		p.to.c.removes.Add(p.from.c.removes.Load())
	}
	r.reopen += o.reopen
	r.clean += o.clean
}

// closeManyPartitions makes a broker with a topic of n partitions, sends
// perPart records to each with acks=all and closes it, closeRounds
// times, and reopens it once more. The timer runs only across the last
// close.
func closeManyPartitions(b *testing.B, n, perPart int) *closeRun {
	r := &closeRun{}
	b.StopTimer()
	defer b.StartTimer()
	dir, err := os.MkdirTemp(os.Getenv("SLUICE_BENCH_DIR"), "close-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfs := &countFS{FS: vfs.OS()}
	br := openBroker(b, dir, "127.0.0.1:0", withFS(cfs))
	if err := br.CreateTopic(context.Background(), "t", int32(n), nil); err != nil {
		br.Close()
		b.Fatal(err)
	}
	for round := range closeRounds {
		if round > 0 {
			br = openBroker(b, dir, "127.0.0.1:0", withFS(cfs))
		}
		produceEverywhere(b, br, n, perPart)
		var st *closeStat
		switch round {
		case 0:
			st = &r.first
		case closeRounds - 1:
			st = &r.second
			b.StartTimer()
		}
		if st != nil {
			cfs.count = &st.c
		}
		start := time.Now()
		err := br.Close()
		b.StopTimer()
		if st != nil {
			st.d = time.Since(start)
		}
		cfs.count = nil
		if err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	rb, err := New(DataDir(dir), ListenAddr("127.0.0.1:0"))
	if err != nil {
		b.Fatal(err)
	}
	r.reopen = time.Since(start)
	defer rb.Close()
	for _, p := range rb.lookup("t").parts {
		if p.Log().Recovery().Clean {
			r.clean++
		}
		if got := p.NextOffset(); got != int64(closeRounds*perPart) {
			b.Fatalf("partition %d reopened with next offset %d, want %d", p.Index(), got, closeRounds*perPart)
		}
	}
	return r
}

// produceEverywhere sends perPart records to each of the n partitions of
// topic t with acks=all: rounds of one Produce request over every
// partition, 15 records each.
func produceEverywhere(b testing.TB, br *Broker, n, perPart int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()), kgo.BrokerMaxWriteBytes(256<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	const per = 15
	raw := storagetest.Build(storagetest.Spec{Records: per, ValueSize: 100, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	for sent := 0; sent < perPart; sent += per {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 60000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "t", br.lookup("t").id
		for p := range n {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = int32(p), raw
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				b.Fatalf("produce to partition %d: error code %d", p.Partition, p.ErrorCode)
			}
		}
	}
}

// countFS counts the syncs, creates and removes made through an FS
// while count is set (set and cleared only while no broker uses it).
type countFS struct {
	vfs.FS
	count *fsCounts
}

type fsCounts struct {
	fileSyncs, dirSyncs, fsSyncs, creates, removes atomic.Int64
}

func (c *fsCounts) syncs() int64 { return c.fileSyncs.Load() + c.dirSyncs.Load() + c.fsSyncs.Load() }

func (c *countFS) add(f func(*fsCounts)) {
	if c.count != nil {
		f(c.count)
	}
}

func (c *countFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return countFile{File: f, fs: c}, nil
}

func (c *countFS) Create(name string) (vfs.File, error) {
	c.add(func(n *fsCounts) { n.creates.Add(1) })
	return c.wrap(c.FS.Create(name))
}

func (c *countFS) OpenRW(name string) (vfs.File, error) { return c.wrap(c.FS.OpenRW(name)) }
func (c *countFS) Open(name string) (vfs.File, error)   { return c.wrap(c.FS.Open(name)) }

func (c *countFS) Remove(name string) error {
	c.add(func(n *fsCounts) { n.removes.Add(1) })
	return c.FS.Remove(name)
}

func (c *countFS) SyncDir(dir string) error {
	c.add(func(n *fsCounts) { n.dirSyncs.Add(1) })
	return c.FS.SyncDir(dir)
}

// SyncDirs counts one filesystem sync when the OS filesystem makes it one
// (see vfs.SyncDirs), else one directory sync each.
func (c *countFS) SyncDirs(dirs []string) error {
	if len(dirs) >= 32 {
		c.add(func(n *fsCounts) { n.fsSyncs.Add(1) })
		return vfs.SyncDirs(c.FS, dirs)
	}
	for _, d := range dirs {
		if err := c.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// SyncBaseline and SyncSince pass a SyncSet's syncs on (one filesystem
// sync); with few entries the set syncs each through Sync and SyncDir.
func (c *countFS) SyncBaseline(dir string) (io.Closer, error) {
	return c.FS.(vfs.FilesSyncer).SyncBaseline(dir)
}

func (c *countFS) SyncSince(h io.Closer, files []vfs.File) error {
	c.add(func(n *fsCounts) { n.fsSyncs.Add(1) })
	return c.FS.(vfs.FilesSyncer).SyncSince(h, files)
}

func (c *countFS) Lock(name string) (vfs.Unlocker, error) { return c.FS.(vfs.Locker).Lock(name) }
func (c *countFS) Usage(dir string) (vfs.Usage, error)    { return c.FS.(vfs.Statter).Usage(dir) }
func (c *countFS) Chmod(name string, mode os.FileMode) error {
	return c.FS.(vfs.Chmoder).Chmod(name, mode)
}

type countFile struct {
	vfs.File
	fs *countFS
}

func (f countFile) Sync() error {
	f.fs.add(func(n *fsCounts) { n.fileSyncs.Add(1) })
	return f.File.Sync()
}

func (f countFile) OS() *os.File { return f.File.(vfs.OSFile).OS() }

// TestCleanRestartSyncsBounded: reopening a data directory after a clean
// shutdown makes a number of filesystem syncs that does not grow with
// its partitions (each partition's checkpoint is zeroed and synced with
// the others in one SyncSet; a partition whose every byte is durable is
// not synced again), and every partition comes back clean and whole.
func TestCleanRestartSyncsBounded(t *testing.T) {
	const parts, perPart = 60, 30
	dir := t.TempDir()
	cfs := &countFS{FS: vfs.OS()}
	br := openBroker(t, dir, "127.0.0.1:0", withFS(cfs))
	if err := br.CreateTopic(context.Background(), "t", parts, nil); err != nil {
		br.Close()
		t.Fatal(err)
	}
	produceEverywhere(t, br, parts, perPart)
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	var c fsCounts
	cfs.count = &c
	rb := openBroker(t, dir, "127.0.0.1:0", withFS(cfs))
	cfs.count = nil
	defer rb.Close()
	if n := c.syncs(); n > 20 {
		t.Fatalf("reopening %d partitions made %d syncs (%d of files, %d of directories, %d of the filesystem)", parts, n, c.fileSyncs.Load(), c.dirSyncs.Load(), c.fsSyncs.Load())
	}
	for _, p := range rb.lookup("t").parts {
		if !p.Log().Recovery().Clean || p.NextOffset() != perPart {
			t.Fatalf("partition %d reopened clean=%v at %d, want clean at %d", p.Index(), p.Log().Recovery().Clean, p.NextOffset(), perPart)
		}
	}
}
