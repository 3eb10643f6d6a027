package broker

// Opening the topics a data directory holds, and each partition.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/meta"
	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// load reads cluster.json and opens every topic.
func (b *Broker) load() error {
	if err := vfs.MkdirAllDurable(b.fs, b.layout.TopicsDir()); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if err := b.loadDynamic(); err != nil {
		return err
	}
	if err := b.telemetry.load(); err != nil {
		return err
	}
	if err := b.loadGroupConfigs(); err != nil {
		return err
	}
	if err := b.fs.RemoveAll(b.layout.DeletedDir()); err != nil {
		return fmt.Errorf("broker: remove deleted topics: %w", err)
	}
	var err error
	if b.cluster, err = b.layout.ReadCluster(b.fs); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("broker: %w", err)
		}
		u := newUUID()
		b.cluster = meta.Cluster{ClusterID: "sluice-" + hex.EncodeToString(u[:8])}
	}
	// Ids from the last reservation on are unused: reserve the next
	// block now, so that the first InitProducerID after a start does not
	// write cluster.json.
	first := b.cluster.PIDLimit
	c := b.cluster
	c.PIDLimit = first + meta.PIDBlock
	if err := b.layout.WriteCluster(b.fs, c); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	b.cluster = c
	b.nextPID.Store(first)

	names, err := b.fs.ReadDir(b.layout.TopicsDir())
	if err != nil {
		return fmt.Errorf("broker: list topics: %w", err)
	}
	var maxPID int64 = -1
	var opened []*partition.Partition
	for _, name := range names {
		tm, err := b.layout.ReadTopic(b.fs, name)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				b.cfg.logger.Warn("removing topic directory of an interrupted creation", "topic", name)
				if err := b.fs.RemoveAll(b.layout.TopicDir(name)); err != nil {
					return fmt.Errorf("broker: remove %s: %w", b.layout.TopicDir(name), err)
				}
				continue
			}
			return fmt.Errorf("broker: topic %s: %w", name, err)
		}
		if err := b.removeStrayPartitions(name, tm.Partitions); err != nil {
			return err
		}
		t, err := b.openTopic(name, tm, false)
		if err != nil {
			return err
		}
		for _, p := range t.parts {
			maxPID = max(maxPID, p.MaxProducerID())
		}
		opened = append(opened, t.parts...)
		b.topics[name] = t
		b.byID[t.id] = t
	}
	// Every partition opened after a clean shutdown zeroed its
	// checkpoint: one filesystem sync for all of them.
	if err := partition.SyncCheckpoints(b.fs, opened); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	b.metrics.topics.Set(float64(len(b.topics)))
	if maxPID >= b.nextPID.Load() {
		// Ids seen in the logs beyond the reservation (an older data
		// directory): hand out only later ones.
		b.nextPID.Store(maxPID + 1)
	}
	return nil
}

// removeStrayPartitions removes partition directories of topic name
// numbered n or more: left by a CreatePartitions that did not complete
// (its topic.json still says n), they must not come back with their data
// when the topic grows later.
func (b *Broker) removeStrayPartitions(name string, n int32) error {
	ents, err := b.fs.ReadDir(b.layout.TopicDir(name))
	if err != nil {
		return fmt.Errorf("broker: list %s: %w", b.layout.TopicDir(name), err)
	}
	for _, e := range ents {
		i, ok := meta.ParsePartitionDir(e)
		if !ok || i < n {
			continue
		}
		dir := b.layout.PartitionDir(name, i)
		b.cfg.logger.Warn("removing the partition directory of an interrupted partition creation", "topic", name, "partition", i)
		if err := b.fs.RemoveAll(dir); err != nil {
			return fmt.Errorf("broker: remove %s: %w", dir, err)
		}
	}
	return nil
}

// openTopic opens (create: creates) the partitions of a topic described
// by tm. On error it closes what it opened.
func (b *Broker) openTopic(name string, tm meta.Topic, create bool) (*topic, error) {
	t := &topic{name: name}
	id, err := hex.DecodeString(tm.ID)
	if err != nil || len(id) != 16 {
		return nil, fmt.Errorf("broker: topic %s: bad id %q", name, tm.ID)
	}
	copy(t.id[:], id)
	if t.conf, err = parseTopicConfigWith(tm.Configs, b.dynamic()); err != nil {
		return nil, fmt.Errorf("broker: topic %s: %w", name, err)
	}
	if create && tm.Partitions >= parallelCreateMin {
		if err := b.createPartitions(t, tm.Partitions); err != nil {
			return nil, err
		}
		return t, nil
	}
	for i := int32(0); i < tm.Partitions; i++ {
		p, err := b.openPartition(t, i, create)
		if err != nil {
			for _, p := range t.parts {
				p.Close()
			}
			return nil, err
		}
		t.parts = append(t.parts, p)
	}
	return t, nil
}

// parallelCreateMin is the fewest partitions of a new topic that
// createPartitions makes on more than one goroutine: below it the
// partitions take a millisecond or two, less than the create's syncs.
const parallelCreateMin = 1024

// createPartitions makes the n partitions of the new topic t, split
// between up to GOMAXPROCS goroutines (at most 4), which end before it
// returns. A new partition touches no file (its log is made in memory,
// storage.Create) and shares nothing with the others but the broker's
// thread-safe parts, so a topic of thousands is made in a fraction of
// the time, while its creator waits. On an error the partitions made
// are closed and the first error is returned.
func (b *Broker) createPartitions(t *topic, n int32) error {
	b.partitionLogger(t) // t.plog and t.dir made once, before the goroutines read them
	b.partitionsDir(t)
	parts := make([]*partition.Partition, n)
	errs := make([]error, n)
	k := int32(min(runtime.GOMAXPROCS(0), 4))
	chunk := (n + k - 1) / k
	var wg sync.WaitGroup
	for from := int32(0); from < n; from += chunk {
		to := min(from+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from; i < to; i++ {
				parts[i], errs[i] = b.openPartition(t, i, true)
			}
		}()
	}
	wg.Wait()
	var first error
	for i := range parts {
		if errs[i] != nil && first == nil {
			first = errs[i]
		}
	}
	if first != nil {
		for _, p := range parts {
			if p != nil {
				p.Close()
			}
		}
		return first
	}
	t.parts = parts
	return nil
}

// openPartition opens (create: creates) one partition of t: its log,
// the WAL's entries for it, its producer state, and its acceptor.
func (b *Broker) openPartition(t *topic, i int32, create bool) (*partition.Partition, error) {
	dir := meta.PartitionDirIn(b.partitionsDir(t), i)
	log := newPartitionLogger(b.partitionLogger(t), i)
	scfg := t.conf.storage()
	scfg.Preallocate = b.cfg.preallocate
	var pt *pendingTarget
	if b.wal != nil {
		scfg.WriteBehind = segmentWriteBehind
		pt = new(pendingTarget)
		scfg.OnPending = func() { b.pendingWrite(pt) }
		scfg.Pending = b.pendBudget
		scfg.DirSyncs = b.dirSyncs
	}
	key := wal.Key{Topic: t.id, Partition: i}
	var pwal acceptor.WAL
	if b.wal != nil {
		pwal = b.wal.For(key)
	}
	p, err := partition.Open(partition.Config{
		FS:      b.fs,
		Dir:     dir,
		Topic:   t.name,
		Index:   i,
		Create:  create,
		Storage: scfg,
		Replay:  func(l *storage.Log) error { return b.replayWAL(key, l, log) },
		Acceptor: acceptor.Config{
			Fsync:          b.cfg.fsync,
			Metrics:        b.accM,
			Syncs:          b.syncs,
			WAL:            pwal,
			HealBackoff:    b.cfg.healBackoff,
			HealBackoffMax: b.cfg.healBackoffMax,
		},
		Snapshots: b.snaps,
		Logger:    log,
	})
	if err != nil {
		var ce *storage.CorruptionError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("broker: %w; to cut the log at the last valid batch "+
				"(a copy is kept), stop the broker and run: sluice repair --data %s --topic %s --partition %d --truncate-after-corruption",
				err, b.cfg.dataDir, t.name, i)
		}
		return nil, fmt.Errorf("broker: %w", err)
	}
	if pt != nil {
		pt.p.Store(p)
		if pt.want.Load() { // written while it opened (the WAL's replay)
			b.makeFiles(p)
		}
	}
	return p, nil
}

// partitionsDir returns t's directory, which holds its partitions':
// computed once per topic value, like partitionLogger.
func (b *Broker) partitionsDir(t *topic) string {
	if t.dir == "" {
		t.dir = b.layout.TopicDir(t.name)
	}
	return t.dir
}

// partitionLogger returns the logger of t's partitions, without the
// partition attribute: made once per topic value rather than once per
// partition. Like partitionsDir it fills t lazily, so a caller opening
// t's partitions on several goroutines calls both first
// (createPartitions).
func (b *Broker) partitionLogger(t *topic) *slog.Logger {
	if t.plog == nil {
		t.plog = b.componentLogger("partition").With("topic", t.name)
	}
	return t.plog
}

// pendingTarget is a partition whose log calls storage.Config.OnPending:
// p is set once the partition is open; want records a call before.
type pendingTarget struct {
	p    atomic.Pointer[partition.Partition]
	want atomic.Bool
}

// pendingWrite is a new partition's storage.Config.OnPending: its first
// bytes are in memory because its files are not made yet (the broker
// has a WAL, which made them durable), so they are made now, on the
// maker goroutine.
func (b *Broker) pendingWrite(pt *pendingTarget) {
	pt.want.Store(true)
	if p := pt.p.Load(); p != nil {
		b.makeFiles(p)
	}
}

// makeFiles queues p for the maker goroutine, which makes the
// directories and first segment files of the partitions queued
// (partition.Prepare) and then their directory entries durable with one
// vfs.SyncDirs, batch after batch, starting when something is queued
// and ending when nothing is. After the broker starts closing nothing is
// queued: a partition's Sync or Close makes its files.
func (b *Broker) makeFiles(p *partition.Partition) {
	b.makeMu.Lock()
	defer b.makeMu.Unlock()
	if b.makeStopped {
		return
	}
	b.makeQueue = append(b.makeQueue, p)
	if b.makeRunning {
		return
	}
	b.makeRunning = true
	b.makeWG.Add(1)
	go b.maker()
}

// maker is makeFiles' goroutine.
func (b *Broker) maker() {
	defer b.makeWG.Done()
	for {
		b.makeMu.Lock()
		batch := b.makeQueue
		b.makeQueue = nil
		if len(batch) == 0 || b.makeStopped {
			b.makeRunning = false
			b.makeMu.Unlock()
			return
		}
		b.makeMu.Unlock()
		b.prepareBatch(batch)
	}
}

// stopMaker stops the maker goroutine and waits for it (Close).
func (b *Broker) stopMaker() {
	b.makeMu.Lock()
	b.makeStopped = true
	b.makeQueue = nil
	b.makeMu.Unlock()
	b.makeWG.Wait()
}

// prepareBatch makes the files of the partitions in batch, which may
// belong to several topics, and syncs their directory entries with
// their topics' directories (prepareParts, the maker). A partition it
// fails for makes its files at its first write or sync.
func (b *Broker) prepareBatch(batch []*partition.Partition) {
	var dirs []string
	var made []*partition.Partition
	topics := map[string]bool{}
	for _, p := range batch {
		if b.closing.Load() {
			return
		}
		if err := p.Prepare(); err != nil {
			if errors.Is(err, storage.ErrFilesHeld) {
				continue // its topic is being deleted
			}
			b.cfg.logger.Warn("making a new partition's files failed; its first sync tries again", "topic", p.Topic(), "partition", p.Index(), "err", err)
			continue
		}
		dirs = append(dirs, p.Dir())
		made = append(made, p)
		if !topics[p.Topic()] {
			topics[p.Topic()] = true
			dirs = append(dirs, b.layout.TopicDir(p.Topic()))
		}
	}
	if len(made) == 0 || b.closing.Load() {
		return
	}
	if err := vfs.SyncDirs(b.fs, dirs); err != nil {
		b.cfg.logger.Debug("syncing new partitions' directories failed", "err", err)
		return
	}
	for _, p := range made {
		p.DirsSynced()
	}
}

// prepareParts makes the directories and first segment files of the
// partitions of a topic just created or grown (partition.Prepare), then
// makes their directory entries durable with one vfs.SyncDirs (with the
// topic directory), so that the first write to each partition finds its
// files made and synced into place. A topic of fewer than
// preparedInline partitions is prepared before the create is answered
// (a few fsyncs). A larger one, with the WAL on, is not prepared: each
// partition's first appends stay in memory until the maker makes its
// files (makeFiles), so that one never written makes none. Without the
// WAL a larger one is prepared on a goroutine of its own after the
// create, so that creating it writes only its topic.json. That goroutine stops when
// the broker closes; a partition it has not reached makes its files at
// its first write and syncs their entries at its first Sync (and
// deleteTopic makes them before moving the directory away).
func (b *Broker) prepareParts(parts []*partition.Partition) {
	if len(parts) < preparedInline {
		b.prepareBatch(parts)
		return
	}
	if b.wal != nil {
		// With the WAL, a partition's first writes stay in memory until
		// the maker makes its files (makeFiles): one never written makes
		// none.
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.prepareBatch(parts)
	}()
}

// preparedInline: topics with fewer new partitions are prepared while
// they are created (prepareParts).
const preparedInline = 32

// pendingBudget is the most bytes the broker's new partitions keep in
// memory, all together, before their files are made
// (storage.PendingBudget): past it each one written asks the maker for
// its files, and past twice it a write makes its own. It is 64 MiB, or
// a 32nd of the memory the broker may use (physicalMemory: a
// container's limit, when it has one) when that is less.
const pendingBudget = 64 << 20

// pendingBudgetFor is pendingBudget on a machine of mem bytes (0:
// unknown).
func pendingBudgetFor(mem int64) int64 {
	if mem <= 0 {
		return pendingBudget
	}
	return min(pendingBudget, max(mem/32, 1<<20))
}

// allocPID returns a new producer id, reserving a new block in
// cluster.json when the current one is used up.
func (b *Broker) allocPID() (int64, error) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	id := b.nextPID.Load()
	if id >= b.cluster.PIDLimit {
		c := b.cluster
		c.PIDLimit = id + meta.PIDBlock
		if err := b.layout.WriteCluster(b.fs, c); err != nil {
			return 0, err
		}
		b.cluster = c
	}
	b.nextPID.Store(id + 1)
	return id, nil
}
