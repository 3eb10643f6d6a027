package groups

import (
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/vfs"
)

// logHarness is a coordinator over the real internal log on a MemFS.
func openLog(t *testing.T, fs vfs.FS, clock *fakeClock, mod func(*Config)) *Coordinator {
	t.Helper()
	cfg := Config{FS: fs, Dir: "data/__groups", NodeID: 1, Now: clock.Now, AfterFunc: clock.AfterFunc}
	if mod != nil {
		mod(&cfg)
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func commitReq(group, member string, gen int32, topic string, offsets ...int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = group, member, gen
	rt := kmsg.OffsetCommitRequestTopic{Topic: topic}
	for p, o := range offsets {
		rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: int32(p), Offset: o, LeaderEpoch: 7})
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	return req
}

func fetchAll(t *testing.T, c *Coordinator, group string) map[tp]int64 {
	t.Helper()
	out, code := c.fetch(group, nil, true, false)
	if code != 0 {
		t.Fatalf("fetch %s: %d", group, code)
	}
	m := map[tp]int64{}
	for _, f := range out {
		m[tp{f.topic, f.Partition}] = f.Offset
	}
	return m
}

func mustCommit(t *testing.T, c *Coordinator, req *kmsg.OffsetCommitRequest) {
	t.Helper()
	for _, rt := range c.OffsetCommit(nil, req).Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("commit %s/%d: code %d", rt.Topic, rp.Partition, rp.ErrorCode)
			}
		}
	}
}

func TestPersistOffsetsAndGroupAcrossReopen(t *testing.T) {
	fs, clock := vfs.NewMem(), newFakeClock()
	c := openLog(t, fs, clock, nil)
	h := &harness{t: t, clock: clock, c: c}
	ids, gen := h.stableGroup("g", 2)
	mustCommit(t, c, commitReq("g", ids[0], gen, "t", 10, 20, 30))
	mustCommit(t, c, commitReq("solo", "", -1, "u", 5))
	mustCommit(t, c, commitReq("gone", "", -1, "u", 1))
	if r := c.DeleteGroups(nil, &kmsg.DeleteGroupsRequest{Groups: []string{"gone"}}); r.Groups[0].ErrorCode != 0 {
		t.Fatal("delete failed")
	}
	// A crash right now, with the coordinator still running, keeps every
	// acknowledged commit: each was fsynced before its reply.
	crashed := fs.CrashClone(vfs.CrashOptions{Tear: true, Rand: rand.New(rand.NewPCG(1, 2))})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	for _, crash := range []bool{false, true} {
		rfs := vfs.FS(fs)
		if crash {
			rfs = crashed
		}
		c2 := openLog(t, rfs, clock, nil)
		if got := fetchAll(t, c2, "g"); len(got) != 3 || got[tp{"t", 2}] != 30 {
			t.Fatalf("crash=%v: offsets of g after reopen: %v", crash, got)
		}
		if got := fetchAll(t, c2, "solo"); got[tp{"u", 0}] != 5 {
			t.Fatalf("crash=%v: offsets of solo: %v", crash, got)
		}
		if got := fetchAll(t, c2, "gone"); len(got) != 0 {
			t.Fatalf("crash=%v: deleted group's offsets came back: %v", crash, got)
		}
		// The group comes back Stable in its generation; its members
		// carry on without rejoining, assignments intact.
		h2 := &harness{t: t, clock: clock, c: c2}
		if s := h2.state("g"); s != "Stable" {
			t.Fatalf("crash=%v: group state after reopen: %s", crash, s)
		}
		if code := h2.heartbeat("g", ids[1], gen, ""); code != 0 {
			t.Fatalf("crash=%v: heartbeat after reopen: %d", crash, code)
		}
		if s := h2.sync("g", ids[1], gen, nil).get(); s.ErrorCode != 0 || string(s.MemberAssignment) != "a-"+ids[1] {
			t.Fatalf("crash=%v: assignment after reopen: %+v", crash, s)
		}
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCompactionKeepsOffsets(t *testing.T) {
	fs, clock := vfs.NewMem(), newFakeClock()
	small := func(c *Config) { c.CompactMinRecords = 40 }
	c := openLog(t, fs, clock, small)
	want := map[tp]int64{}
	for i := 0; i < 300; i++ {
		p := int32(i % 5)
		req := commitReq("g", "", -1, "t")
		req.Topics[0].Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: p, Offset: int64(i)}}
		mustCommit(t, c, req)
		want[tp{"t", p}] = int64(i)
	}
	st := c.st.(*logStore)
	if st.Generation() < 2 {
		t.Fatalf("log never compacted (directory %d)", st.Generation())
	}
	if n := st.Records(); n > 100 {
		t.Fatalf("compacted log holds %d records for 5 live keys", n)
	}
	names, _ := fs.ReadDir("data/__groups")
	if len(names) != 2 || names[0] != "CURRENT" || !strings.HasPrefix(names[1], "log-") {
		t.Fatalf("directory after compaction: %v", names)
	}
	if got := fetchAll(t, c, "g"); !equalOffsets(got, want) {
		t.Fatalf("offsets after compaction: %v, want %v", got, want)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := openLog(t, fs, clock, small)
	if got := fetchAll(t, c2, "g"); !equalOffsets(got, want) {
		t.Fatalf("offsets after compaction and reopen: %v, want %v", got, want)
	}
	// A commit after the compaction overrides the compacted value.
	req := commitReq("g", "", -1, "t")
	req.Topics[0].Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1_000_000}}
	mustCommit(t, c2, req)
	if got := fetchAll(t, c2, "g")[tp{"t", 0}]; got != 1_000_000 {
		t.Fatalf("commit after compaction: %d", got)
	}
}

func TestCompactionOnOpenAndLeftovers(t *testing.T) {
	fs, clock := vfs.NewMem(), newFakeClock()
	c := openLog(t, fs, clock, nil)
	for i := 0; i < 200; i++ {
		mustCommit(t, c, commitReq("g", "", -1, "t", int64(i)))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// A leftover of an interrupted compaction is removed on open.
	if err := fs.MkdirAll("data/__groups/log-000009"); err != nil {
		t.Fatal(err)
	}
	c2 := openLog(t, fs, clock, func(c *Config) { c.CompactMinRecords = 10 })
	st := c2.st.(*logStore)
	if st.Generation() != 2 || st.Records() != 1 {
		t.Fatalf("open did not compact: directory %d, %d records", st.Generation(), st.Records())
	}
	if _, err := fs.Stat(path.Join("data/__groups", "log-000009")); err == nil {
		t.Fatal("leftover log directory kept")
	}
	if got := fetchAll(t, c2, "g")[tp{"t", 0}]; got != 199 {
		t.Fatalf("offset after compaction on open: %d", got)
	}
}

func TestOpenRejectsBadCurrent(t *testing.T) {
	fs, clock := vfs.NewMem(), newFakeClock()
	_ = fs.MkdirAll("d")
	f, _ := fs.Create("d/CURRENT")
	_, _ = f.Write([]byte("garbage"))
	_ = f.Close()
	_, err := Open(Config{FS: fs, Dir: "d", Now: clock.Now, AfterFunc: clock.AfterFunc})
	if err == nil || !strings.Contains(err.Error(), "not a log directory") {
		t.Fatalf("Open with a corrupt CURRENT: %v", err)
	}
	if _, err := Open(Config{Dir: "d"}); err == nil {
		t.Fatal("Open without FS succeeded")
	}
}

func equalOffsets(a, b map[tp]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestCommitFailsWhenTheDiskFails(t *testing.T) {
	fs, clock := vfs.NewMem(), newFakeClock()
	c := openLog(t, fs, clock, nil)
	mustCommit(t, c, commitReq("g", "", -1, "t", 1))
	// Every fsync from now on fails: the commit is not acknowledged.
	fs.Inject(vfs.FailNth(vfs.OpSync, fs.Ops(vfs.OpSync)+1, syscall.EIO, true))
	resp := c.OffsetCommit(nil, commitReq("g", "", -1, "t", 2))
	if got := resp.Topics[0].Partitions[0].ErrorCode; got != errCoordinatorNotAvailable {
		t.Fatalf("commit on a failing disk: code %d", got)
	}
	if got := fetchAll(t, c, "g")[tp{"t", 0}]; got != 1 {
		t.Fatalf("offset after a failed commit: %d, want 1", got)
	}
	_ = c.Close() // reports the failed log
}

func TestConcurrentCommitsAcrossCompactions(t *testing.T) {
	fs, clock := vfs.NewMem(), newFakeClock()
	small := func(c *Config) { c.CompactMinRecords = 64 }
	c := openLog(t, fs, clock, small)
	const writers, rounds = 4, 150
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := fmt.Sprintf("g%d", w)
			for i := 0; i < rounds; i++ {
				req := commitReq(group, "", -1, "t")
				req.Topics[0].Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: int32(i % 3), Offset: int64(i)}}
				if code := c.OffsetCommit(nil, req).Topics[0].Partitions[0].ErrorCode; code != 0 {
					t.Errorf("commit: %d", code)
					return
				}
			}
		}()
	}
	wg.Wait()
	if c.st.(*logStore).Generation() < 2 {
		t.Fatal("no compaction ran")
	}
	want := map[tp]int64{{"t", 0}: rounds - 3, {"t", 1}: rounds - 2, {"t", 2}: rounds - 1}
	check := func(c *Coordinator, what string) {
		for w := 0; w < writers; w++ {
			if got := fetchAll(t, c, fmt.Sprintf("g%d", w)); !equalOffsets(got, want) {
				t.Fatalf("%s: group g%d offsets %v, want %v", what, w, got, want)
			}
		}
	}
	check(c, "live")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	check(openLog(t, fs, clock, small), "reopened")
}

// TestCompactionSwitchFailureKeepsOffsets fails the directory fsync that
// follows the rename of CURRENT during a compaction. The rename itself
// happened, so CURRENT names the new log; the store must not then remove
// that log and keep writing the old one, or the next Open follows
// CURRENT to an empty log (and removes the old one): every committed
// offset would be gone.
func TestCompactionSwitchFailureKeepsOffsets(t *testing.T) {
	fs, clock := vfs.NewMem(), newFakeClock()
	small := func(c *Config) { c.CompactMinRecords = 10 }
	c := openLog(t, fs, clock, small)
	renamed, failed := false, false
	fs.Inject(func(op vfs.Op) error {
		switch {
		case op.Kind == vfs.OpRename && strings.HasSuffix(op.Name, "CURRENT.tmp") && !failed:
			renamed = true
		case op.Kind == vfs.OpSyncDir && renamed && !failed:
			failed = true
			return vfs.Errno(op, syscall.EIO)
		}
		return nil
	})
	// Commit until the switch fails, then stop: a later compaction would
	// write CURRENT again and hide the damage.
	var last int64 = -1
	for i := int64(0); i < 100 && !failed; i++ {
		resp := c.OffsetCommit(nil, commitReq("g", "", -1, "t", i))
		if resp.Topics[0].Partitions[0].ErrorCode == 0 {
			last = i
		}
	}
	fs.Inject(nil)
	if !failed {
		t.Fatal("no compaction reached the CURRENT switch")
	}
	if last < 0 {
		t.Fatal("no commit was acknowledged")
	}
	if err := c.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	c2 := openLog(t, fs, clock, small)
	if got, ok := fetchAll(t, c2, "g")[tp{"t", 0}]; !ok || got != last {
		t.Fatalf("offset after a failed compaction switch and reopen: %d (found %v), want the last acknowledged %d", got, ok, last)
	}
}
