package share

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/vfs"
)

// groupOverrides is a changeable GroupSettings for tests.
type groupOverrides struct {
	mu sync.Mutex
	m  map[string]func(*Settings)
}

func (o *groupOverrides) set(group string, f func(*Settings)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[group] = f
}

func (o *groupOverrides) settings(group string, s Settings) Settings {
	o.mu.Lock()
	defer o.mu.Unlock()
	if f := o.m[group]; f != nil {
		f(&s)
	}
	return s
}

// TestGroupSettings: a group's own settings apply to it without a
// restart: share.auto.offset.reset to share partitions initialized
// after the change, the delivery count limit, lock duration and
// heartbeat interval from the next request on.
func TestGroupSettings(t *testing.T) {
	l := newMemLog()
	l.add(t, 4, false, false)
	o := &groupOverrides{m: map[string]func(*Settings){}}
	c, err := Open(Config{FS: vfs.NewMem(), Dir: "/share", Logs: memLogs{l},
		Settings:      Settings{AutoOffsetReset: "latest", DeliveryCountLimit: 5},
		GroupSettings: o.settings})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	o.set("g", func(s *Settings) {
		s.AutoOffsetReset, s.DeliveryCountLimit = "earliest", 2
		s.RecordLockDuration, s.HeartbeatInterval = 20*time.Second, 7*time.Second
	})
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, "g", "m1", []string{"t"}
	r := c.Heartbeat(Client{}, hb)
	if r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 7000 {
		t.Fatalf("heartbeat: code %d, interval %d ms; want 0 and the group's 7000", r.ErrorCode, r.HeartbeatIntervalMillis)
	}

	f := kmsg.NewPtrShareFetchRequest()
	f.Version, f.GroupID, f.MemberID, f.MaxRecords, f.ShareAcquireMode = 2, kmsg.StringPtr("g"), kmsg.StringPtr("m1"), 10, 1
	f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
	fr := c.Fetch(t.Context(), f, nil, nil)
	if fr.AcquisitionLockTimeoutMillis != 20000 {
		t.Fatalf("lock timeout %d ms, want the group's 20000", fr.AcquisitionLockTimeoutMillis)
	}
	var got []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, tp := range fr.Topics {
		for _, p := range tp.Partitions {
			got = append(got, p.AcquiredRecords...)
		}
	}
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 3 {
		t.Fatalf("first fetch acquired %+v, want 0-3: the group's earliest, not the broker's latest", got)
	}

	// Delivery count limit 2: released after the second delivery, a
	// record is archived, not delivered a third time.
	if rs, code := fetch(t, c, "m1", 1, 10, ack{0, 3, AckRelease}); code != 0 || len(rs) != 1 || rs[0].Count != 2 {
		t.Fatalf("second delivery: %+v code %d, want 0-3 delivered twice", rs, code)
	}
	if rs, code := fetch(t, c, "m1", 2, 10, ack{0, 3, AckRelease}); code != 0 || len(rs) != 0 {
		t.Fatalf("after the limit: %+v code %d, want nothing: archived at the group's limit of 2", rs, code)
	}

	// Another group keeps the broker's settings: latest, so nothing.
	hb.GroupID, hb.MemberID = "other", "m2"
	if r := c.Heartbeat(Client{}, hb); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("other group heartbeat: code %d, interval %d, want the broker's 5000", r.ErrorCode, r.HeartbeatIntervalMillis)
	}
	f.GroupID, f.MemberID = kmsg.StringPtr("other"), kmsg.StringPtr("m2")
	fr = c.Fetch(t.Context(), f, nil, nil)
	if fr.AcquisitionLockTimeoutMillis != 30000 {
		t.Fatalf("other group lock timeout %d, want the broker's 30000", fr.AcquisitionLockTimeoutMillis)
	}
	for _, tp := range fr.Topics {
		for _, p := range tp.Partitions {
			if len(p.AcquiredRecords) != 0 {
				t.Fatalf("other group acquired %+v, want nothing (latest)", p.AcquiredRecords)
			}
		}
	}

	// Changing share.auto.offset.reset later does not move a share
	// partition already initialized, as in Kafka.
	o.set("other", func(s *Settings) { s.AutoOffsetReset = "earliest" })
	f.ShareSessionEpoch = 1
	fr = c.Fetch(t.Context(), f, nil, nil)
	for _, tp := range fr.Topics {
		for _, p := range tp.Partitions {
			if len(p.AcquiredRecords) != 0 {
				t.Fatalf("after the change the other group acquired %+v, want nothing: its start offset was set", p.AcquiredRecords)
			}
		}
	}
}
