package broker

// The topic registry: lookups, and the changes (create, delete, add
// partitions) made under adminMu. Opening what the data directory holds
// is in topicstore.go, name rules in topicnames.go.

import (
	"errors"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/meta"
	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/vfs"
)

// topic is one topic. Its fields never change once it is published in
// Broker.topics: CreatePartitions publishes a new topic value.
type topic struct {
	name  string
	id    [16]byte
	conf  topicConfig
	parts []*partition.Partition
	// plog is the partitions' logger with the topic attribute, made by
	// the first partition opened through this value (partitionLogger),
	// before the value is published.
	plog *slog.Logger
	// dir is the topic's directory (meta.Layout.TopicDir), made like plog
	// (partitionsDir).
	dir string
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
	tm := meta.Topic{ID: uuidString(newUUID()), Partitions: partitions, Configs: configs}
	dir := b.layout.TopicDir(name)
	if err := vfs.MkdirAllDurable(b.fs, dir); err != nil {
		return nil, errCode(kerr.KafkaStorageError, "create topic %s: %v", name, err)
	}
	t, err := b.openTopic(name, tm, true)
	if err == nil {
		err = b.layout.WriteTopic(b.fs, name, tm)
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
	b.prepareParts(t.parts)
	b.cfg.logger.Info("topic created", "topic", name, "partitions", partitions)
	return t, nil
}

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
	del := b.layout.DeletedDir()
	aside := b.layout.DeletedTopicDir(name, uuidString(t.id))
	err := vfs.MkdirAllDurable(b.fs, del)
	// A partition that has not made its files yet (a large topic's
	// partitions make them at their first write) must not make them
	// while or after the directory moves: they would appear at the old
	// path. Held, it makes none; a rollback releases them.
	for _, p := range t.parts {
		p.HoldFiles()
	}
	release := func() {
		for _, p := range t.parts {
			p.ReleaseFiles()
		}
	}
	renamed := false
	if err == nil {
		if err = b.fs.Rename(b.layout.TopicDir(name), aside); err == nil {
			renamed = true
			// The deletion is durable only once both directories are
			// synced; until then a power cut brings the topic back, so a
			// failed sync is a failed deletion.
			if err = b.fs.SyncDir(del); err == nil {
				err = b.fs.SyncDir(b.layout.TopicsDir())
			}
		}
	}
	if err != nil {
		if renamed {
			if rerr := b.fs.Rename(aside, b.layout.TopicDir(name)); rerr != nil {
				// Neither here nor there for certain: the next start
				// finishes the deletion if the rename was kept.
				b.cfg.logger.Warn("delete topic: a directory sync failed and the topic could not be put back; it is deleted at the next start", "topic", name, "err", rerr)
				b.closeDeleted(t)
				b.metrics.topics.Dec()
				return errCode(kerr.KafkaStorageError, "delete topic %s: %v (the deletion completes at the next start)", name, err)
			}
		}
		release()
		b.mu.Lock()
		b.topics[name] = t
		b.byID[t.id] = t
		b.mu.Unlock()
		return errCode(kerr.KafkaStorageError, "delete topic %s: %v (the topic was not deleted)", name, err)
	}
	b.metrics.topics.Dec()
	log := b.cfg.logger.With("topic", name)
	b.closeDeleted(t)
	if err := b.fs.RemoveAll(aside); err != nil {
		log.Warn("delete topic: removing its files failed; they are removed at the next start", "dir", aside, "err", err)
	}
	log.Info("topic deleted")
	return nil
}

// closeDeleted stops the partitions of a topic taken out of the registry,
// writing nothing more to their files (partition.Discard).
func (b *Broker) closeDeleted(t *topic) {
	if err := partition.DiscardAll(t.parts); err != nil {
		b.cfg.logger.Debug("delete topic: closing partitions of the deleted topic failed", "topic", t.name, "err", err)
	}
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
	tm := meta.Topic{ID: uuidString(t.id), Partitions: count, Configs: t.conf.explicit}
	if err := b.layout.WriteTopic(b.fs, name, tm); err != nil {
		b.dropNewPartitions(nt, have, count)
		return errCode(kerr.KafkaStorageError, "%v (no partition was added)", err)
	}
	b.mu.Lock()
	b.topics[name] = nt
	b.byID[nt.id] = nt
	b.mu.Unlock()
	b.prepareParts(nt.parts[have:])
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
		b.fs.RemoveAll(b.layout.PartitionDir(nt.name, i))
	}
}
