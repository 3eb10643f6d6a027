package kvlog

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/internal/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// model is the live state a Log stores in the tests: key → value.
type model struct {
	mu sync.Mutex // guards m
	m  map[string]int
}

// load replays l into md and starts l with md's snapshot.
func (md *model) load(l *Log) error {
	err := l.Replay(func(_ int64, r Record) error {
		v, err := strconv.Atoi(string(r.Value))
		if err != nil {
			return err
		}
		md.m[string(r.Key)] = v
		return nil
	})
	if err != nil {
		return err
	}
	return l.Start(md.snapshot)
}

func (md *model) snapshot() []Record {
	md.mu.Lock()
	defer md.mu.Unlock()
	var out []Record
	for k, v := range md.m {
		out = append(out, Record{Key: []byte(k), Value: []byte(strconv.Itoa(v))})
	}
	return out
}

func open(t *testing.T, fs vfs.FS) (*Log, *model, error) {
	t.Helper()
	md := &model{m: map[string]int{}}
	l, err := Open(Config{FS: fs, Dir: "kv", CompactMinRecords: 8})
	if err != nil {
		return nil, nil, err
	}
	err = md.load(l)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, md, nil
}

// workload writes 60 values over 4 keys (compacting several times) and
// returns, per key, the last acknowledged and the last attempted value.
func workload(l *Log, md *model) (acked, tried map[string]int) {
	acked, tried = map[string]int{}, map[string]int{}
	for i := 1; i <= 60; i++ {
		k := fmt.Sprintf("k%d", i%4)
		tried[k] = i
		err := l.Append([]Record{{Key: []byte(k), Value: []byte(strconv.Itoa(i))}}, func(int64) {
			md.mu.Lock()
			md.m[k] = i
			md.mu.Unlock()
		})
		if err != nil {
			return acked, tried
		}
		acked[k] = i
	}
	return acked, tried
}

// TestCompactionCrashAtEveryBoundary crashes the log at every mutating
// filesystem operation of a workload that compacts several times; the
// reopened log holds, for every key, its last acknowledged value or a
// later attempted one, never an older one and never a mix of logs.
func TestCompactionCrashAtEveryBoundary(t *testing.T) {
	fs := vfs.NewMem()
	l, md, err := open(t, fs)
	if err != nil {
		t.Fatal(err)
	}
	acked, _ := workload(l, md)
	if len(acked) != 4 || acked["k0"] != 60 {
		t.Fatalf("clean run: %v", acked)
	}
	if l.seq < 4 {
		t.Fatalf("the workload compacted only %d times", l.seq-1)
	}
	l.Close()
	if r, rmd, err := open(t, fs); err != nil || fmt.Sprint(rmd.m) != fmt.Sprint(map[string]int{"k0": 60, "k1": 57, "k2": 58, "k3": 59}) {
		t.Fatalf("clean reopen: %v %v", rmd, err)
	} else {
		r.Close()
	}
	total := fs.Seq()
	rng := rand.New(rand.NewPCG(3, 4))
	for n := int64(1); n <= total; n++ {
		for _, tear := range []bool{false, true} {
			fs := vfs.NewMem()
			fs.Inject(vfs.FailFromSeq(n, syscall.EIO))
			var acked, tried map[string]int
			if l, md, err := open(t, fs); err == nil {
				acked, tried = workload(l, md)
				l.Close()
			}
			crashed := fs.CrashClone(vfs.CrashOptions{Tear: tear, Rand: rng})
			r, rmd, err := open(t, crashed)
			if err != nil {
				t.Fatalf("op %d tear %v: reopen: %v", n, tear, err)
			}
			for k, a := range acked {
				if v := rmd.m[k]; v < a || v > tried[k] || (v%4 != a%4) {
					t.Fatalf("op %d tear %v: key %s recovered %d, acknowledged %d, last tried %d", n, tear, k, v, a, tried[k])
				}
			}
			r.Close()
		}
	}
}

// TestNewLogSurvivesPowerCut: the first Open of a log creates its
// directory tree (kv, kv/CURRENT, kv/log-000001) and an acknowledged
// Append is durable, so a power cut right after it keeps the record:
// every directory entry on the way was synced into its parent. With
// kv made durable beforehand (as the broker makes its data directory),
// the log directory the first Open creates must survive too.
func TestNewLogSurvivesPowerCut(t *testing.T) {
	for _, c := range []struct{ wal, dirExists bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
		wal := c.wal
		t.Run(fmt.Sprintf("wal=%v,dir=%v", c.wal, c.dirExists), func(t *testing.T) {
			open := func(fs vfs.FS) (*Log, *model, func()) {
				t.Helper()
				if !wal {
					l, md, err := open(t, fs)
					if err != nil {
						t.Fatal(err)
					}
					return l, md, func() { l.Close() }
				}
				l, w, md, err := openWithWAL(t, fs, true)
				if err != nil {
					t.Fatal(err)
				}
				return l, md, func() { l.Close(); w.Close() }
			}
			fs := vfs.NewMem()
			if c.dirExists {
				if err := vfs.MkdirAllDurable(fs, "kv"); err != nil {
					t.Fatal(err)
				}
			}
			l, _, closeAll := open(fs)
			// Fewer records than CompactMinRecords: the log stays the
			// one Open created.
			acked := map[string]int{}
			for i := 1; i <= 4; i++ {
				k := fmt.Sprintf("k%d", i)
				if err := l.Append([]Record{{Key: []byte(k), Value: []byte(strconv.Itoa(i))}}, nil); err != nil {
					t.Fatal(err)
				}
				acked[k] = i
			}
			if l.seq != 1 {
				t.Fatalf("the log compacted (seq %d)", l.seq)
			}
			crashed := fs.CrashClone(vfs.CrashOptions{})
			closeAll()
			for _, p := range []string{"kv", "kv/CURRENT", "kv/" + logDirName(l.seq)} {
				if _, err := crashed.Stat(p); err != nil {
					t.Errorf("lost in the power cut: %s (%v)", p, err)
				}
			}
			_, rmd, closeAll := open(crashed)
			defer closeAll()
			for k, a := range acked {
				if v := rmd.m[k]; v != a {
					t.Errorf("key %s recovered %d after the power cut, acknowledged %d", k, v, a)
				}
			}
		})
	}
}
