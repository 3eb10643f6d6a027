package meta

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/sluicedb/sluice/internal/vfs"
)

func TestLayoutPaths(t *testing.T) {
	l := Layout{Root: "/data"}
	for got, want := range map[string]string{
		l.Lock():                          "/data/LOCK",
		l.ClusterFile():                   "/data/cluster.json",
		l.BrokerFile():                    "/data/broker.json",
		l.TopicFile("orders"):             "/data/topics/orders/topic.json",
		l.PartitionDir("orders", 12):      "/data/topics/orders/12",
		l.GroupsDir():                     "/data/groups",
		l.TransactionsDir():               "/data/transactions",
		l.SecurityDir():                   "/data/security",
		l.WALDir():                        "/data/wal",
		l.DeletedTopicDir("orders", "ab"): "/data/deleted/orders.ab",
	} {
		if got != want {
			t.Errorf("path %q, want %q", got, want)
		}
	}
	// PartitionDirIn appends to a clean topic directory what Join would.
	for _, root := range []string{"/data", "data/", ".", "", "/", "a/../b", "./x//y"} {
		for _, topic := range []string{"orders", "a.b", "_x", "x-y", "...", ".."} {
			l := Layout{Root: root}
			for _, i := range []int32{0, 7, 1999} {
				want := filepath.Join(root, topicsDir, topic, strconv.Itoa(int(i)))
				if got := l.PartitionDir(topic, i); got != want {
					t.Errorf("Layout{%q}.PartitionDir(%q, %d) = %q, want %q", root, topic, i, got, want)
				}
			}
		}
	}
	for name, want := range map[string]int32{"0": 0, "17": 17} {
		if i, ok := ParsePartitionDir(name); !ok || i != want {
			t.Errorf("ParsePartitionDir(%q) = %d, %v", name, i, ok)
		}
	}
	for _, name := range []string{"", "-1", "01", "x", "topic.json", "99999999999"} {
		if _, ok := ParsePartitionDir(name); ok {
			t.Errorf("ParsePartitionDir(%q) accepted", name)
		}
	}
}

// TestFilesRoundTrip: each metadata file reads back what was written, and
// a missing one is os.ErrNotExist.
func TestFilesRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	l := Layout{Root: "/data"}
	if err := vfs.MkdirAllDurable(fs, l.TopicDir("t")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReadCluster(fs); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing cluster.json: %v", err)
	}
	c := Cluster{ClusterID: "sluice-1", PIDLimit: PIDBlock}
	tm := Topic{ID: "00112233445566778899aabbccddeeff", Partitions: 3, Configs: map[string]string{"cleanup.policy": "compact"}}
	br := Broker{PerBroker: map[string]string{"log.retention.ms": "1000"}}
	if err := l.WriteCluster(fs, c); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteTopic(fs, "t", tm); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteBroker(fs, br); err != nil {
		t.Fatal(err)
	}
	if got, err := l.ReadCluster(fs); err != nil || got != c {
		t.Fatalf("cluster %+v, %v", got, err)
	}
	if got, err := l.ReadTopic(fs, "t"); err != nil || !reflect.DeepEqual(got, tm) {
		t.Fatalf("topic %+v, %v", got, err)
	}
	if got, err := l.ReadBroker(fs); err != nil || !reflect.DeepEqual(got, br) {
		t.Fatalf("broker %+v, %v", got, err)
	}
	// Each survives a crash once written.
	crashed := fs.CrashClone(vfs.CrashOptions{})
	if got, err := l.ReadTopic(crashed, "t"); err != nil || !reflect.DeepEqual(got, tm) {
		t.Fatalf("topic after a crash %+v, %v", got, err)
	}
}
