package share

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/vfs"
)

var testLim = Limits{LockMs: 1000, DeliveryLimit: 3, MaxLocks: 8}

// TestStateTransitions: acquisition, each acknowledgement type, lock
// expiry, the delivery limit and the in-flight window, step by step.
func TestStateTransitions(t *testing.T) {
	bs := []Batch{{0, 3, false}, {4, 4, true}, {5, 9, false}, {10, 11, false}}
	type step struct {
		name  string
		do    func(s *spState) error
		start int64
		end   int64
		want  map[int64]State // offsets not listed: as before
	}
	var acquired []Range
	steps := []step{
		{"acquire stops at the window", func(s *spState) error {
			acquired, _ = s.acquire("a", bs, 100, false, 0, testLim)
			return nil
		}, 0, 8, map[int64]State{0: Acquired, 3: Acquired, 4: Archived, 5: Acquired, 7: Acquired}},
		{"accept the head moves the start", func(s *spState) error {
			return s.ack("a", 0, 1, []int8{int8(AckAccept)}, false, 0, testLim)
		}, 2, 8, map[int64]State{2: Acquired}},
		{"another member cannot acknowledge", func(s *spState) error {
			if err := s.ack("b", 2, 2, []int8{int8(AckAccept)}, false, 0, testLim); err == nil || err.(*ackError).code != kerr.InvalidRecordState.Code {
				return fmt.Errorf("ack by b: %v", err)
			}
			return nil
		}, 2, 8, nil},
		{"per-offset types", func(s *spState) error {
			return s.ack("a", 2, 3, []int8{int8(AckRelease), int8(AckReject)}, false, 0, testLim)
		}, 2, 8, map[int64]State{2: Available, 3: Archived}},
		{"renew needs v2", func(s *spState) error {
			if err := s.ack("a", 5, 5, []int8{int8(AckRenew)}, false, 0, testLim); err == nil {
				return fmt.Errorf("renew accepted without IsRenewAck")
			}
			return s.ack("a", 5, 5, []int8{int8(AckRenew)}, true, 500, testLim)
		}, 2, 8, nil},
		{"expiry releases all but the renewed", func(s *spState) error {
			if !s.expire(1000, "", testLim) {
				return fmt.Errorf("nothing expired")
			}
			return nil
		}, 2, 8, map[int64]State{5: Acquired, 6: Available, 7: Available}},
	}
	s := newState(0)
	for _, st := range steps {
		if err := st.do(s); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if s.start != st.start || s.end() != st.end {
			t.Fatalf("%s: window %d-%d, want %d-%d", st.name, s.start, s.end(), st.start, st.end)
		}
		for off, want := range st.want {
			if got := s.at(off).state; got != want {
				t.Fatalf("%s: offset %d %s, want %s", st.name, off, got, want)
			}
		}
	}
	if len(acquired) != 2 || acquired[0] != (Range{0, 3, 1}) || acquired[1] != (Range{5, 7, 1}) {
		t.Fatalf("acquired %v", acquired)
	}
	// Redelivery counts up to the limit, then the record is archived.
	for d := int16(2); d <= 3; d++ {
		rs, _ := s.acquire("b", []Batch{{2, 2, false}}, 10, true, 2000, testLim)
		if len(rs) != 1 || rs[0] != (Range{2, 2, d}) {
			t.Fatalf("delivery %d: %v", d, rs)
		}
		if err := s.ack("b", 2, 2, []int8{int8(AckRelease)}, false, 2000, testLim); err != nil {
			t.Fatal(err)
		}
	}
	if s.start != 5 {
		t.Fatalf("start %d after offset 2 reached the limit, want 5 (2 archived, 3 rejected, 4 control)", s.start)
	}
	if err := s.ack("a", 0, 0, []int8{1, 1}, false, 0, testLim); err == nil || err.(*ackError).code != kerr.InvalidRequest.Code {
		t.Fatalf("mismatched type count: %v", err)
	}
}

// TestAcquireModes: record-limit mode stops at the count, batch mode at
// the end of the batch; skipped batches are archived undelivered.
func TestAcquireModes(t *testing.T) {
	lim := Limits{LockMs: 1000, DeliveryLimit: 5, MaxLocks: 1000}
	bs := []Batch{{0, 4, false}, {5, 9, false}}
	s := newState(0)
	rs, used := s.acquire("m", bs, 3, true, 0, lim)
	if len(rs) != 1 || rs[0] != (Range{0, 2, 1}) || !used[0] || used[1] {
		t.Fatalf("strict: %v %v", rs, used)
	}
	s = newState(0)
	rs, used = s.acquire("m", bs, 3, false, 0, lim)
	if len(rs) != 1 || rs[0] != (Range{0, 4, 1}) || !used[0] || used[1] {
		t.Fatalf("batch mode: %v %v", rs, used)
	}
	// A gap in the log (compaction) is archived.
	s = newState(0)
	rs, _ = s.acquire("m", []Batch{{0, 1, false}, {5, 6, false}}, 10, false, 0, lim)
	if len(rs) != 2 || rs[1] != (Range{5, 6, 1}) || s.at(3).state != Archived {
		t.Fatalf("gap: %v, offset 3 %v", rs, s.at(3).state)
	}
	// The log's start moving past the window archives it.
	s.trimTo(4)
	if s.start != 4 || s.end() != 7 {
		t.Fatalf("trim: %d-%d", s.start, s.end())
	}
}

// TestEncodeRoundTrip: full values and deltas rebuild the same durable
// state.
func TestEncodeRoundTrip(t *testing.T) {
	lim := Limits{LockMs: 1000, DeliveryLimit: 5, MaxLocks: 1000}
	s := newState(10)
	var replayed *spState
	step := func(fn func()) {
		fn()
		d := s.takeDelta()
		if d == nil {
			return
		}
		var err error
		replayed, err = apply(replayed, d)
		if err != nil {
			t.Fatal(err)
		}
	}
	replayed, _ = apply(nil, s.full())
	step(func() { s.acquire("m", []Batch{{10, 19, false}, {20, 20, true}, {21, 30, false}}, 100, false, 0, lim) })
	step(func() { _ = s.ack("m", 10, 12, []int8{1}, false, 0, lim) })
	step(func() { _ = s.ack("m", 15, 16, []int8{3, 2}, false, 0, lim) })
	step(func() { s.expire(2000, "", lim) })
	step(func() { s.acquire("n", []Batch{{13, 19, false}}, 2, true, 2000, lim) })
	want := func(x *spState) string {
		var b []string
		for o := x.start; o < x.end(); o++ {
			r := x.at(o)
			b = append(b, fmt.Sprintf("%d:%s/%d", o, durable(r), r.count))
		}
		return fmt.Sprint(x.start, b)
	}
	if want(s) != want(replayed) {
		t.Fatalf("replayed %s\nwant     %s", want(replayed), want(s))
	}
	full, err := apply(nil, s.full())
	if err != nil || want(full) != want(s) {
		t.Fatalf("full: %v %s", err, want(full))
	}
	for _, bad := range [][]byte{nil, {0}, {9, 0, 0, 0}, {0, 1, 2, 1, 0, 1, 7, 0}, append(s.full(), 1)} {
		if _, err := apply(nil, bad); err == nil {
			t.Errorf("apply(%v) accepted", bad)
		}
	}
}

// TestCoordinatorRestart: acknowledged records stay acknowledged across
// a clean restart, acquired ones come back with their counts, and those
// at the delivery limit are archived.
func TestCoordinatorRestart(t *testing.T) {
	fs := vfs.NewMem()
	l := newMemLog()
	for range 5 {
		l.add(t, 2, false, false)
	}
	s := Settings{DeliveryCountLimit: 2}
	c := openTest(t, fs, l, s)
	join(t, c, "m1")
	if rs, _ := fetch(t, c, "m1", 0, 6); len(offsets(rs)) != 6 {
		t.Fatalf("first fetch %v", rs)
	}
	if rs, code := fetch(t, c, "m1", 1, 2, ack{0, 1, AckAccept}, ack{2, 2, AckRelease}, ack{3, 3, AckReject}); code != 0 || len(offsets(rs)) != 2 {
		t.Fatalf("second fetch %v %d", rs, code) // offsets 2 (count 2) and 6
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openTest(t, fs, l, s)
	defer c.Close()
	join(t, c, "m2")
	rs, _ := fetch(t, c, "m2", 0, 100)
	got := offsets(rs)
	want := map[int64]int16{4: 2, 5: 2, 7: 1, 8: 1, 9: 1} // 2 and 6 hit the limit... 6 was delivered once
	want[6] = 2
	delete(want, 2)
	if !maps.Equal(got, want) {
		t.Fatalf("after restart acquired %v, want %v", got, want)
	}
	sums := c.Summaries()
	if len(sums) != 1 || sums[0].Parts[0].Start != 4 {
		t.Fatalf("summary %+v", sums)
	}
}

// TestReadCommitted: aborted and open transactions' records are never
// delivered; control batches are archived.
func TestReadCommitted(t *testing.T) {
	l := newMemLog()
	l.add(t, 2, false, false)        // 0-1
	ab := l.add(t, 2, false, true)   // 2-3 aborted
	l.add(t, 1, true, false)         // 4 abort marker
	l.add(t, 2, false, false)        // 5-6
	open := l.add(t, 2, false, true) // 7-8 open transaction
	l.aborted[ab] = true
	l.lso = open
	c := openTest(t, vfs.NewMem(), l, Settings{IsolationLevel: "read_committed"})
	defer c.Close()
	join(t, c, "m")
	rs, _ := fetch(t, c, "m", 0, 100)
	got := slices.Sorted(maps.Keys(offsets(rs)))
	if !slices.Equal(got, []int64{0, 1, 5, 6}) {
		t.Fatalf("read_committed acquired %v", got)
	}
}

// TestCrashAtEveryWrite: a workload of acquisitions and acknowledgements
// is cut by a power loss before each of its filesystem writes in turn;
// after recovery no answered acceptance or rejection is delivered
// again, and every record answered as acquired and not acknowledged is
// delivered again with a higher delivery count. It runs twice: with the
// state log never compacted, and compacted every few records, so that
// the cuts fall in snapshot writes and switches too.
func TestCrashAtEveryWrite(t *testing.T) {
	for _, compact := range []int{0, 2} {
		t.Run(fmt.Sprintf("compact=%d", compact), func(t *testing.T) { crashAtEveryWrite(t, compact) })
	}
}

func crashAtEveryWrite(t *testing.T, compactMin int) {
	l := newMemLog()
	for range 10 {
		l.add(t, 2, false, false)
	}
	type facts struct {
		settled  map[int64]bool  // answered accepted or rejected
		acquired map[int64]int16 // answered acquired: highest count
		acked    map[int64]bool  // in some acknowledgement sent (answered or not)
	}
	var probeGen int // the state log's generation after the uncut workload
	workload := func(fs *vfs.MemFS, f *facts, cut int64) {
		answered := func() bool { return cut == 0 || fs.Seq() < cut }
		c, err := Open(Config{FS: fs, Dir: "/share", Logs: memLogs{l}, Settings: Settings{AutoOffsetReset: "earliest"}, CompactMinRecords: compactMin})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer c.Close()
		join(t, c, "m1")
		note := func(rs []Range) {
			if answered() {
				for o, n := range offsets(rs) {
					f.acquired[o] = max(f.acquired[o], n)
				}
			}
		}
		settle := func(acks ...ack) {
			for _, a := range acks {
				for o := a.first; o <= a.last; o++ {
					f.acked[o] = true
				}
			}
		}
		rs, _ := fetch(t, c, "m1", 0, 6)
		note(rs)
		a1 := []ack{{0, 1, AckAccept}, {2, 3, AckRelease}, {4, 4, AckReject}}
		settle(a1...)
		rs, code := fetch(t, c, "m1", 1, 4, a1...)
		if code != 0 {
			t.Fatalf("acks: %d", code)
		}
		if answered() {
			for _, o := range []int64{0, 1, 4} {
				f.settled[o] = true
			}
			for _, o := range []int64{2, 3} {
				delete(f.acked, o) // released: must come back
			}
		}
		note(rs)
		a2 := []ack{{2, 3, AckAccept}, {6, 6, AckAccept}}
		settle(a2...)
		if code := acknowledge(t, c, "m1", 2, a2...); code != 0 {
			t.Fatalf("acknowledge: %d", code)
		}
		if answered() {
			f.settled[2], f.settled[3], f.settled[6] = true, true, true
		}
		rs, _ = fetch(t, c, "m1", 3, 3, ack{7, 7, AckReject})
		settle(ack{7, 7, AckReject})
		if answered() {
			f.settled[7] = true
		}
		note(rs)
		if cut == 0 {
			probeGen = c.log.Generation()
		}
	}
	newFacts := func() *facts {
		return &facts{map[int64]bool{}, map[int64]int16{}, map[int64]bool{}}
	}
	probe := vfs.NewMem()
	workload(probe, newFacts(), 0)
	total := probe.Seq()
	if compactMin > 0 && probeGen < 2 {
		t.Fatalf("the state log was never compacted during the workload (generation %d)", probeGen)
	}
	if total < 10 {
		t.Fatalf("the workload made only %d writes", total)
	}
	t.Logf("cutting before each of %d writes", total)
	for cut := int64(1); cut <= total; cut++ {
		fs := vfs.NewMem()
		clone := fs.CrashBefore(cut, vfs.CrashOptions{})
		f := newFacts()
		workload(fs, f, cut)
		cfs := clone()
		if cfs == nil {
			t.Fatalf("cut %d: no crash clone", cut)
		}
		c, err := Open(Config{FS: cfs, Dir: "/share", Logs: memLogs{l}, Settings: Settings{AutoOffsetReset: "earliest"}, CompactMinRecords: compactMin})
		if err != nil {
			t.Fatalf("cut %d: recovery: %v", cut, err)
		}
		join(t, c, "after")
		rs, _ := fetch(t, c, "after", 0, 100)
		got := offsets(rs)
		for o := range got {
			if f.settled[o] {
				t.Errorf("cut %d: offset %d redelivered after an answered acknowledgement", cut, o)
			}
		}
		for o, n := range f.acquired {
			if f.settled[o] || f.acked[o] {
				continue
			}
			if got[o] <= n {
				t.Errorf("cut %d: offset %d answered as delivered %d times, redelivered with count %d", cut, o, n, got[o])
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMemberTimeoutAndDelete: a member that stops heartbeating is
// removed after the session timeout, its records released at once; an
// empty group can be deleted, durably, and a group with members cannot.
func TestMemberTimeoutAndDelete(t *testing.T) {
	fs := vfs.NewMem()
	l := newMemLog()
	l.add(t, 4, false, false)
	var (
		mu  sync.Mutex
		now = time.Unix(1000, 0)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := Settings{AutoOffsetReset: "earliest", HeartbeatInterval: time.Second, SessionTimeout: 3 * time.Second}
	c, err := Open(Config{FS: fs, Dir: "/share", Logs: memLogs{l}, Settings: s, Now: clock, Tick: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	join(t, c, "m1")
	if rs, _ := fetch(t, c, "m1", 0, 100); len(offsets(rs)) != 4 {
		t.Fatalf("fetch %v", rs)
	}
	if code, _ := c.Delete("g"); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %d", code)
	}
	mu.Lock()
	now = now.Add(4 * time.Second) // past the session timeout, within the 30s lock
	mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for {
		sums := c.Summaries()
		if len(sums[0].Members) == 0 && sums[0].Parts[0].Available == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member not expired: %+v", sums)
		}
		time.Sleep(time.Millisecond)
	}
	if code, msg := c.Delete("g"); code != 0 {
		t.Fatalf("delete: %d %s", code, msg)
	}
	if code, _ := c.Delete("g"); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("second delete: %d", code)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openTest(t, fs, l, Settings{})
	defer c.Close()
	if c.Exists("g") {
		t.Fatal("the deleted group is back after a restart")
	}
}

// TestSimpleAssignor: every partition is read and every member reads;
// with more members than partitions the partitions are shared evenly.
func TestSimpleAssignor(t *testing.T) {
	for _, tc := range []struct{ members, partitions, perMember, perPartition int }{
		{4, 2, 1, 2}, {2, 4, 2, 1}, {3, 3, 1, 1}, {16, 4, 1, 4}, {1, 5, 5, 1},
	} {
		c := &Coordinator{}
		g := newGroup("g")
		for i := range tc.members {
			id := fmt.Sprintf("m%02d", i)
			g.members[id] = &member{id: id, topics: []string{"t"}}
		}
		c.assignLocked(g, map[string]TopicInfo{"t": {ID: topicID, Partitions: int32(tc.partitions)}})
		readers := map[int32]int{}
		for id := range g.members {
			if n := len(g.target[id]); n != tc.perMember {
				t.Errorf("%d members, %d partitions: %s has %d partitions, want %d", tc.members, tc.partitions, id, n, tc.perMember)
			}
			for _, tp := range g.target[id] {
				readers[tp.Partition]++
			}
		}
		for p := range int32(tc.partitions) {
			if readers[p] != tc.perPartition {
				t.Errorf("%d members, %d partitions: partition %d read by %d, want %d", tc.members, tc.partitions, p, readers[p], tc.perPartition)
			}
		}
		if g.epoch != 1 {
			t.Errorf("epoch %d after the first assignment, want 1", g.epoch)
		}
		c.assignLocked(g, map[string]TopicInfo{"t": {ID: topicID, Partitions: int32(tc.partitions)}})
		if g.epoch != 1 {
			t.Errorf("epoch %d after an unchanged assignment, want 1", g.epoch)
		}
	}
}

// TestFetchWakesOnRelease: a ShareFetch waiting for records returns
// with them when another member releases its records, not at the end
// of its wait.
func TestFetchWakesOnRelease(t *testing.T) {
	l := newMemLog()
	l.add(t, 3, false, false)
	c := openTest(t, vfs.NewMem(), l, Settings{})
	defer c.Close()
	join(t, c, "a")
	join(t, c, "b")
	if rs, _ := fetch(t, c, "a", 0, 100); len(offsets(rs)) != 3 {
		t.Fatalf("a acquired %v", rs)
	}
	if rs, _ := fetch(t, c, "b", 0, 100); len(rs) != 0 {
		t.Fatalf("b acquired %v while a holds everything", rs)
	}
	got := make(chan []Range, 1)
	go func() {
		f := kmsg.NewPtrShareFetchRequest()
		f.Version, f.GroupID, f.MemberID, f.ShareSessionEpoch, f.MaxWaitMillis = 2, kmsg.StringPtr("g"), kmsg.StringPtr("b"), 1, 60000
		f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
		var out []Range
		for _, tp := range c.Fetch(t.Context(), f, nil, nil).Topics {
			for _, p := range tp.Partitions {
				for _, a := range p.AcquiredRecords {
					out = append(out, Range{a.FirstOffset, a.LastOffset, a.DeliveryCount})
				}
			}
		}
		got <- out
	}()
	// The release comes once b's fetch has opened its round (its session
	// epoch moved): before its acquisition pass, which then finds the
	// records, or after it, when only the wake-up brings them.
	for {
		c.mu.Lock()
		s := c.sessions[sessionKey{"g", "b"}]
		moved := s != nil && s.epoch == 2
		c.mu.Unlock()
		if moved {
			break
		}
		runtime.Gosched()
	}
	if code := acknowledge(t, c, "a", 1, ack{0, 2, AckRelease}); code != 0 {
		t.Fatalf("release: %d", code)
	}
	rs := <-got
	if want := map[int64]int16{0: 2, 1: 2, 2: 2}; !maps.Equal(offsets(rs), want) {
		t.Fatalf("b woke with %v, want %v", offsets(rs), want)
	}
}

// TestAutoOffsetResetByDuration: by_duration starts a share partition at
// the first record at most that long ago; bad durations are refused.
func TestAutoOffsetResetByDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT1H": time.Hour, "P1DT2H": 26 * time.Hour, "PT1M30S": 90 * time.Second, "PT0.5S": 500 * time.Millisecond, "P2D": 48 * time.Hour,
	} {
		if got, err := parseISODuration(in); err != nil || got != want {
			t.Errorf("parse %q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "P", "PT", "1H", "PT-1H", "P1H", "PT1H2D", "PTxS", "P1DT"} {
		if _, err := parseISODuration(in); err == nil {
			t.Errorf("parse %q accepted", in)
		}
	}
	if _, err := (Settings{AutoOffsetReset: "by_duration:soon"}).WithDefaults(); err == nil {
		t.Error("by_duration:soon accepted")
	}
	l := newMemLog()
	for range 5 {
		l.add(t, 2, false, false) // batches at 0, 2, 4, 6, 8: timestamps 0 s, 2 s, ... 8 s
	}
	now := time.UnixMilli(9000)
	c, err := Open(Config{FS: vfs.NewMem(), Dir: "/share", Logs: memLogs{l}, Now: func() time.Time { return now },
		Settings: Settings{AutoOffsetReset: "by_duration:PT4S"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	join(t, c, "m")
	rs, _ := fetch(t, c, "m", 0, 100)
	if got := slices.Sorted(maps.Keys(offsets(rs))); !slices.Equal(got, []int64{6, 7, 8, 9}) {
		t.Fatalf("by_duration:PT4S at 9 s acquired %v, want 6-9 (records of 5 s on)", got)
	}
}
