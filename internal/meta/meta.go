package meta

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/sluicedb/sluice/internal/vfs"
)

// Names in the data directory (see the package doc).
const (
	LockFile    = "LOCK"
	clusterFile = "cluster.json"
	brokerFile  = "broker.json"
	metricsFile = "client-metrics.json"
	topicsDir   = "topics"
	topicFile   = "topic.json"
	groupsDir   = "groups"
	txnDir      = "transactions"
	securityDir = "security"
	walDir      = "wal"
	deletedDir  = "deleted"
)

// Layout names the paths of the data directory Root.
type Layout struct {
	Root string
}

func (l Layout) join(elem ...string) string {
	return filepath.Join(append([]string{l.Root}, elem...)...)
}

// Lock is the lock file.
func (l Layout) Lock() string { return l.join(LockFile) }

// ClusterFile holds Cluster.
func (l Layout) ClusterFile() string { return l.join(clusterFile) }

// BrokerFile holds Broker.
func (l Layout) BrokerFile() string { return l.join(brokerFile) }

// TopicsDir holds a directory per topic.
func (l Layout) TopicsDir() string { return l.join(topicsDir) }

// TopicDir is a topic's directory.
func (l Layout) TopicDir(topic string) string { return l.join(topicsDir, topic) }

// TopicFile holds a topic's Topic.
func (l Layout) TopicFile(topic string) string { return l.join(topicsDir, topic, topicFile) }

// PartitionDir is a partition's directory.
func (l Layout) PartitionDir(topic string, partition int32) string {
	return PartitionDirIn(l.TopicDir(topic), partition)
}

// PartitionDirIn is PartitionDir for the topic whose TopicDir is
// topicDir, made without cleaning the path again: the index is a plain
// name, so topicDir, clean, stays clean with it appended. A caller that
// opens many partitions of one topic computes topicDir once.
func PartitionDirIn(topicDir string, partition int32) string {
	idx := strconv.Itoa(int(partition))
	switch topicDir {
	case ".":
		return idx
	case string(filepath.Separator):
		return topicDir + idx
	}
	return topicDir + string(filepath.Separator) + idx
}

// ParsePartitionDir reports whether name, an entry of a topic
// directory, is a partition directory, and its index.
func ParsePartitionDir(name string) (int32, bool) {
	i, err := strconv.ParseInt(name, 10, 32)
	if err != nil || i < 0 || strconv.FormatInt(i, 10) != name {
		return 0, false
	}
	return int32(i), true
}

// GroupsDir holds the group coordinator's log.
func (l Layout) GroupsDir() string { return l.join(groupsDir) }

// TransactionsDir holds the transaction coordinator's log.
func (l Layout) TransactionsDir() string { return l.join(txnDir) }

// CoordinatorDir is the directory of the coordinator log named name
// ("groups" or "transactions", the logs' WAL names).
func (l Layout) CoordinatorDir(name string) string { return l.join(name) }

// SecurityDir holds the credential and ACL stores.
func (l Layout) SecurityDir() string { return l.join(securityDir) }

// WALDir holds the shared write-ahead log.
func (l Layout) WALDir() string { return l.join(walDir) }

// DeletedDir holds topics being deleted.
func (l Layout) DeletedDir() string { return l.join(deletedDir) }

// DeletedTopicDir is where a deleted topic's directory is renamed to,
// named by its name and id so that a topic recreated under the same name
// never collides.
func (l Layout) DeletedTopicDir(topic, id string) string {
	return l.join(deletedDir, topic+"."+id)
}

// PIDBlock is how many producer ids are reserved in cluster.json at a
// time, so that ids are never reused across restarts.
const PIDBlock = 1000

// Cluster is cluster.json.
type Cluster struct {
	ClusterID string `json:"cluster_id"`
	// PIDLimit: every producer id below it may have been handed out.
	PIDLimit int64 `json:"pid_limit"`
}

// Topic is a topic's topic.json.
type Topic struct {
	ID         string            `json:"id"` // 32 hex digits
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// Broker is broker.json: the broker configuration set at run time,
// resource "0" (this broker) and resource "" (the cluster default).
type Broker struct {
	PerBroker      map[string]string `json:"broker,omitempty"`
	ClusterDefault map[string]string `json:"cluster_default,omitempty"`
}

// ReadCluster reads cluster.json; a missing file gives an error matching
// os.ErrNotExist.
func (l Layout) ReadCluster(fs vfs.FS) (Cluster, error) {
	var c Cluster
	err := readJSON(fs, l.ClusterFile(), &c)
	return c, err
}

// WriteCluster replaces cluster.json.
func (l Layout) WriteCluster(fs vfs.FS, c Cluster) error { return writeJSON(fs, l.ClusterFile(), c) }

// ReadTopic reads a topic's topic.json; a missing file gives an error
// matching os.ErrNotExist.
func (l Layout) ReadTopic(fs vfs.FS, topic string) (Topic, error) {
	var t Topic
	err := readJSON(fs, l.TopicFile(topic), &t)
	return t, err
}

// WriteTopic replaces a topic's topic.json.
func (l Layout) WriteTopic(fs vfs.FS, topic string, t Topic) error {
	return writeJSON(fs, l.TopicFile(topic), t)
}

// ReadBroker reads broker.json; a missing file gives an error matching
// os.ErrNotExist.
func (l Layout) ReadBroker(fs vfs.FS) (Broker, error) {
	var b Broker
	err := readJSON(fs, l.BrokerFile(), &b)
	return b, err
}

// WriteBroker replaces broker.json.
func (l Layout) WriteBroker(fs vfs.FS, b Broker) error { return writeJSON(fs, l.BrokerFile(), b) }

// ClientMetricsFile is client-metrics.json.
func (l Layout) ClientMetricsFile() string { return l.join(metricsFile) }

// ClientMetrics is client-metrics.json: the client telemetry
// subscriptions (KIP-714 CLIENT_METRICS config resources), each
// subscription's configs by its name.
type ClientMetrics struct {
	Subscriptions map[string]map[string]string `json:"subscriptions,omitempty"`
}

// ReadClientMetrics reads client-metrics.json; a missing file gives an
// error matching os.ErrNotExist.
func (l Layout) ReadClientMetrics(fs vfs.FS) (ClientMetrics, error) {
	var c ClientMetrics
	err := readJSON(fs, l.ClientMetricsFile(), &c)
	return c, err
}

// WriteClientMetrics replaces client-metrics.json.
func (l Layout) WriteClientMetrics(fs vfs.FS, c ClientMetrics) error {
	return writeJSON(fs, l.ClientMetricsFile(), c)
}

func writeJSON(fs vfs.FS, name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return vfs.WriteFileAtomic(fs, name, append(data, '\n'))
}

func readJSON(fs vfs.FS, name string, v any) error {
	data, err := vfs.ReadFile(fs, name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", name, err)
	}
	return nil
}
