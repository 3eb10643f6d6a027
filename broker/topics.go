package broker

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// Data directory layout:
//
//	cluster.json                   cluster id and the reserved producer-id block
//	broker.json                    dynamic broker configs (AlterConfigs on broker 0 or "")
//	topics/<name>/topic.json       a topic's id, partition count and configs
//	topics/<name>/<partition>/     a partition's segment files (package storage)
//	groups/                        the group coordinator's internal log
//	deleted/                       topics being deleted (removed at start)
//	wal/                           the write-ahead log shared by the partitions (package wal)
//
// Every metadata file is written to <name>.tmp, fsynced, renamed into
// place, and its directory fsynced. A topic directory without topic.json
// is an interrupted creation and is removed at start.
const (
	clusterFile = "cluster.json"
	topicsDir   = "topics"
	topicFile   = "topic.json"
	groupsDir   = "groups"
	deletedDir  = "deleted"
	walDir      = "wal"
)

// pidBlock is how many producer ids are reserved in cluster.json at a
// time, so that ids are never reused across restarts.
const pidBlock = 1000

type clusterMeta struct {
	ClusterID string `json:"cluster_id"`
	// PIDLimit: every producer id below it may have been handed out.
	PIDLimit int64 `json:"pid_limit"`
}

type topicMeta struct {
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// topic is one topic. Its fields never change once it is published in
// Broker.topics: CreatePartitions publishes a new topic value.
type topic struct {
	name  string
	id    [16]byte
	conf  topicConfig
	parts []*partition.Partition
}

func (b *Broker) topicPath(name string) string {
	return filepath.Join(b.cfg.dataDir, topicsDir, name)
}

// load reads cluster.json and opens every topic.
func (b *Broker) load() error {
	for _, d := range []string{b.cfg.dataDir, filepath.Join(b.cfg.dataDir, topicsDir)} {
		if err := b.fs.MkdirAll(d); err != nil {
			return fmt.Errorf("broker: create %s: %w", d, err)
		}
	}
	if err := b.loadDynamic(); err != nil {
		return err
	}
	if err := b.fs.RemoveAll(filepath.Join(b.cfg.dataDir, deletedDir)); err != nil {
		return fmt.Errorf("broker: remove deleted topics: %w", err)
	}
	if err := readJSON(b.fs, filepath.Join(b.cfg.dataDir, clusterFile), &b.cluster); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("broker: %w", err)
		}
		u := newUUID()
		b.cluster = clusterMeta{ClusterID: "sluice-" + hex.EncodeToString(u[:8])}
		if err := writeJSON(b.fs, filepath.Join(b.cfg.dataDir, clusterFile), &b.cluster); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
	}
	b.nextPID.Store(b.cluster.PIDLimit)

	names, err := b.fs.ReadDir(filepath.Join(b.cfg.dataDir, topicsDir))
	if err != nil {
		return fmt.Errorf("broker: list topics: %w", err)
	}
	var maxPID int64 = -1
	for _, name := range names {
		var tm topicMeta
		if err := readJSON(b.fs, filepath.Join(b.topicPath(name), topicFile), &tm); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				b.cfg.logger.Warn("removing topic directory of an interrupted creation", "topic", name)
				if err := b.fs.RemoveAll(b.topicPath(name)); err != nil {
					return fmt.Errorf("broker: remove %s: %w", b.topicPath(name), err)
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
		b.topics[name] = t
		b.byID[t.id] = t
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
	ents, err := b.fs.ReadDir(b.topicPath(name))
	if err != nil {
		return fmt.Errorf("broker: list %s: %w", b.topicPath(name), err)
	}
	for _, e := range ents {
		i, err := strconv.ParseInt(e, 10, 32)
		if err != nil || i < int64(n) || strconv.FormatInt(i, 10) != e {
			continue
		}
		dir := filepath.Join(b.topicPath(name), e)
		b.cfg.logger.Warn("removing the partition directory of an interrupted partition creation", "topic", name, "partition", i)
		if err := b.fs.RemoveAll(dir); err != nil {
			return fmt.Errorf("broker: remove %s: %w", dir, err)
		}
	}
	return nil
}

// openTopic opens (create: creates) the partitions of a topic described
// by tm. On error it closes what it opened.
func (b *Broker) openTopic(name string, tm topicMeta, create bool) (*topic, error) {
	t := &topic{name: name}
	id, err := hex.DecodeString(tm.ID)
	if err != nil || len(id) != 16 {
		return nil, fmt.Errorf("broker: topic %s: bad id %q", name, tm.ID)
	}
	copy(t.id[:], id)
	if t.conf, err = parseTopicConfigWith(tm.Configs, b.dynamic()); err != nil {
		return nil, fmt.Errorf("broker: topic %s: %w", name, err)
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

// openPartition opens (create: creates) one partition of t: its log,
// the WAL's entries for it, its producer state, and its acceptor.
func (b *Broker) openPartition(t *topic, i int32, create bool) (*partition.Partition, error) {
	dir := filepath.Join(b.topicPath(t.name), strconv.Itoa(int(i)))
	log := b.componentLogger("partition").With("topic", t.name, "partition", i)
	scfg := t.conf.storage()
	scfg.Preallocate = b.cfg.preallocate
	if b.wal != nil {
		scfg.WriteBehind = segmentWriteBehind
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
			Policy:         b.cfg.fsync,
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
	return p, nil
}

// lookup returns a topic by name, or nil.
func (b *Broker) lookup(name string) *topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topics[name]
}

func (b *Broker) lookupID(id [16]byte) *topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.byID[id]
}

func (b *Broker) partition(name string, idx int32) *partition.Partition {
	t := b.lookup(name)
	if t == nil || idx < 0 || int(idx) >= len(t.parts) {
		return nil
	}
	return t.parts[idx]
}

func (b *Broker) partitionExists(name string, idx int32) bool { return b.partition(name, idx) != nil }

// sortedTopics returns every topic, by name.
func (b *Broker) sortedTopics() []*topic {
	b.mu.RLock()
	ts := make([]*topic, 0, len(b.topics))
	for _, t := range b.topics {
		ts = append(ts, t)
	}
	b.mu.RUnlock()
	slices.SortFunc(ts, func(a, c *topic) int {
		switch {
		case a.name < c.name:
			return -1
		case a.name > c.name:
			return 1
		}
		return 0
	})
	return ts
}

// validTopicName applies Kafka's rules: 1-249 characters of [a-zA-Z0-9._-],
// not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("topic name %q is not allowed", name)
	}
	if len(name) > 249 {
		return fmt.Errorf("topic name is %d characters long, more than 249", len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic name %q holds %q; only ASCII letters, digits, '.', '_' and '-' are allowed", name, r)
		}
	}
	return nil
}

// codeError is an error carrying a Kafka error code.
type codeError struct {
	code *kerr.Error
	msg  string
}

func (e *codeError) Error() string { return e.code.Message + ": " + e.msg }
func (e *codeError) Unwrap() error { return e.code }

func errCode(code *kerr.Error, format string, args ...any) error {
	return &codeError{code: code, msg: fmt.Sprintf(format, args...)}
}

// codeOf returns the Kafka error code of err (0 for nil, UNKNOWN_SERVER_ERROR
// for an error without one).
func codeOf(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// createTopic creates and publishes a topic. validateOnly checks without
// creating.
func (b *Broker) createTopic(name string, partitions int32, configs map[string]string, validateOnly bool) (*topic, error) {
	return b.createTopicAs(name, partitions, configs, validateOnly, false)
}

// createTopicAs is createTopic; internal is set when the broker creates
// one of its internal topics (internal_topics.go), whose names clients
// may not create.
func (b *Broker) createTopicAs(name string, partitions int32, configs map[string]string, validateOnly, internal bool) (*topic, error) {
	if err := validTopicName(name); err != nil {
		return nil, errCode(kerr.InvalidTopicException, "%v", err)
	}
	if isInternalTopic(name) && !internal {
		return nil, errCode(kerr.InvalidTopicException, "%s is an internal topic of Sluice's coordinators", name)
	}
	if partitions == -1 {
		partitions = b.cfg.defaultPartitions
	}
	if partitions < 1 || partitions > maxPartitions {
		return nil, errCode(kerr.InvalidPartitions, "%d partitions; a topic has 1 to %d", partitions, maxPartitions)
	}
	if _, err := parseTopicConfigWith(configs, b.dynamic()); err != nil {
		return nil, err
	}
	if err := checkHonoured(configs); err != nil {
		return nil, err
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.closing.Load() {
		return nil, errCode(kerr.BrokerNotAvailable, "the broker is shutting down")
	}
	if b.lookup(name) != nil {
		return nil, errCode(kerr.TopicAlreadyExists, "topic %q already exists", name)
	}
	if validateOnly {
		return nil, nil
	}
	tm := topicMeta{ID: uuidString(newUUID()), Partitions: partitions, Configs: configs}
	dir := b.topicPath(name)
	if err := b.fs.MkdirAll(dir); err != nil {
		return nil, errCode(kerr.KafkaStorageError, "create %s: %v", dir, err)
	}
	t, err := b.openTopic(name, tm, true)
	if err == nil {
		err = writeJSON(b.fs, filepath.Join(dir, topicFile), &tm)
		if err == nil {
			err = b.fs.SyncDir(filepath.Join(b.cfg.dataDir, topicsDir))
		}
		if err != nil {
			for _, p := range t.parts {
				p.Close()
			}
		}
	}
	if err != nil {
		b.fs.RemoveAll(dir)
		return nil, errCode(kerr.KafkaStorageError, "create topic %s: %v", name, err)
	}
	b.mu.Lock()
	b.topics[name] = t
	b.byID[t.id] = t
	b.mu.Unlock()
	b.metrics.topics.Inc()
	b.cfg.logger.Info("topic created", "topic", name, "partitions", partitions)
	return t, nil
}

// maxPartitions bounds a topic's partition count (each is a directory,
// open files and a goroutine).
const maxPartitions = 10000

// autoCreate returns the named topic, creating it when auto-creation is
// on. It returns nil when the topic does not exist and cannot be created.
func (b *Broker) autoCreate(name string) (*topic, error) {
	if t := b.lookup(name); t != nil {
		return t, nil
	}
	if !b.cfg.autoCreate {
		return nil, errCode(kerr.UnknownTopicOrPartition, "topic %q does not exist and auto-creation is off", name)
	}
	t, err := b.createTopic(name, b.cfg.defaultPartitions, nil, false)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		if t := b.lookup(name); t != nil {
			return t, nil
		}
	}
	return t, err
}

// deleteTopic removes a topic. Its answer is the truth: success only
// once the topic is gone, an error only while it still exists. The
// commit point is the rename of its directory into deleted/ (both
// directories then fsynced); until then a failure puts the topic back
// as it was. Afterwards the partitions are stopped and the files
// removed; failures there (a full disk failing a last checkpoint) do not
// matter to data being deleted, and whatever is left in deleted/ is
// removed at the next start.
func (b *Broker) deleteTopic(name string) error {
	if isInternalTopic(name) {
		return errCode(kerr.InvalidTopicException, "%s is an internal topic of Sluice's coordinators and cannot be deleted", name)
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	b.mu.Lock()
	t := b.topics[name]
	if t != nil {
		delete(b.topics, name)
		delete(b.byID, t.id)
	}
	b.mu.Unlock()
	if t == nil {
		return errCode(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	del := filepath.Join(b.cfg.dataDir, deletedDir)
	aside := filepath.Join(del, name+"."+uuidString(t.id))
	err := b.fs.MkdirAll(del)
	if err == nil {
		err = b.fs.Rename(b.topicPath(name), aside)
	}
	if err != nil {
		b.mu.Lock()
		b.topics[name] = t
		b.byID[t.id] = t
		b.mu.Unlock()
		return errCode(kerr.KafkaStorageError, "delete topic %s: %v (the topic was not deleted)", name, err)
	}
	b.metrics.topics.Dec()
	log := b.cfg.logger.With("topic", name)
	for _, d := range []string{filepath.Join(b.cfg.dataDir, topicsDir), del} {
		if err := b.fs.SyncDir(d); err != nil {
			log.Warn("delete topic: directory sync failed; the deletion is completed at the next start", "dir", d, "err", err)
		}
	}
	for _, p := range t.parts {
		if err := p.Close(); err != nil {
			log.Debug("delete topic: closing a partition of the deleted topic failed", "err", err)
		}
	}
	if err := b.fs.RemoveAll(aside); err != nil {
		log.Warn("delete topic: removing its files failed; they are removed at the next start", "dir", aside, "err", err)
	}
	log.Info("topic deleted")
	return nil
}

// addPartitions grows a topic to count partitions.
func (b *Broker) addPartitions(name string, count int32, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.lookup(name)
	if t == nil {
		return errCode(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	if isInternalTopic(name) {
		return errCode(kerr.InvalidTopicException, "%s is an internal topic: its one partition mirrors the group coordinator", name)
	}
	have := int32(len(t.parts))
	switch {
	case count < have:
		return errCode(kerr.InvalidPartitions, "topic %q has %d partitions; partitions cannot be removed", name, have)
	case count == have:
		return errCode(kerr.InvalidPartitions, "topic %q already has %d partitions", name, have)
	case count > maxPartitions:
		return errCode(kerr.InvalidPartitions, "%d partitions; a topic has at most %d", count, maxPartitions)
	}
	if validateOnly {
		return nil
	}
	nt := &topic{name: t.name, id: t.id, conf: t.conf, parts: slices.Clone(t.parts)}
	for i := have; i < count; i++ {
		p, err := b.openPartition(nt, i, true)
		if err != nil {
			b.dropNewPartitions(nt, have, count)
			return errCode(kerr.KafkaStorageError, "%v (no partition was added)", err)
		}
		nt.parts = append(nt.parts, p)
	}
	tm := topicMeta{ID: uuidString(t.id), Partitions: count, Configs: t.conf.explicit}
	if err := writeJSON(b.fs, filepath.Join(b.topicPath(name), topicFile), &tm); err != nil {
		b.dropNewPartitions(nt, have, count)
		return errCode(kerr.KafkaStorageError, "%v (no partition was added)", err)
	}
	b.mu.Lock()
	b.topics[name] = nt
	b.byID[nt.id] = nt
	b.mu.Unlock()
	b.cfg.logger.Info("partitions added", "topic", name, "partitions", count)
	return nil
}

// dropNewPartitions undoes a failed addPartitions: it closes the
// partitions opened from index have and removes their directories (a
// leftover would be picked up, data and all, by a later CreatePartitions;
// load removes any a crash leaves).
func (b *Broker) dropNewPartitions(nt *topic, have, count int32) {
	for _, p := range nt.parts[have:] {
		p.Close()
	}
	for i := have; i < count; i++ {
		b.fs.RemoveAll(filepath.Join(b.topicPath(nt.name), strconv.Itoa(int(i))))
	}
}

// allocPID returns a new producer id, reserving a new block in
// cluster.json when the current one is used up.
func (b *Broker) allocPID() (int64, error) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	id := b.nextPID.Load()
	if id >= b.cluster.PIDLimit {
		c := b.cluster
		c.PIDLimit = id + pidBlock
		if err := writeJSON(b.fs, filepath.Join(b.cfg.dataDir, clusterFile), &c); err != nil {
			return 0, err
		}
		b.cluster = c
	}
	b.nextPID.Store(id + 1)
	return id, nil
}

// writeJSON writes v to name atomically and durably (writeFileAtomic).
func writeJSON(fs vfs.FS, name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return writeFileAtomic(fs, name, append(data, '\n'))
}

// writeFileAtomic writes data to name atomically and durably: a
// temporary file, fsynced, renamed into place, then the directory
// fsynced.
func writeFileAtomic(fs vfs.FS, name string, data []byte) error {
	tmp := name + ".tmp"
	if err := fs.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", tmp, err)
	}
	f, err := fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fs.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := fs.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("sync directory of %s: %w", name, err)
	}
	return nil
}

// readJSON reads a file written by writeJSON. A missing file gives an
// error matching os.ErrNotExist.
func readJSON(fs vfs.FS, name string, v any) error {
	f, err := fs.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("stat %s: %w", name, err)
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", name, err)
	}
	return nil
}
