package repair

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"sluice/internal/storage"
	"sluice/internal/storage/storagetest"
	"sluice/internal/vfs"
)

func makeLog(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	l, err := storage.Open(fs, dir, storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(storagetest.MakeBatch(3, 10, 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRunSelection: Run checks the partitions asked for, names a missing
// topic or partition, and refuses a locked directory.
func TestRunSelection(t *testing.T) {
	m := vfs.NewMem()
	for _, d := range []string{"/data/topics/a/0", "/data/topics/a/1", "/data/topics/b/0", "/data/groups/log-000002", "/data/transactions/log-000001"} {
		makeLog(t, m, d)
	}
	f, _ := m.Create("/data/groups/CURRENT")
	f.Write([]byte("log-000002\n"))
	f.Close()
	f, _ = m.Create("/data/transactions/CURRENT")
	f.Write([]byte("log-000001\n"))
	f.Close()
	cases := []struct {
		o    Options
		want string // output, or the error when err is set
		err  bool
	}{
		{Options{Data: "/data", Partition: -1}, "a/0: ok\na/1: ok\nb/0: ok\ngroups: ok\ntransactions: ok\n", false},
		{Options{Data: "/data", Topic: "a", Partition: 1}, "a/1: ok\n", false},
		{Options{Data: "/data", Topic: "zzz", Partition: -1}, `topic "zzz" does not exist`, true},
		{Options{Data: "/data", Topic: "a", Partition: 7}, "partition a/7 does not exist", true},
		{Options{Data: "/nowhere", Partition: -1}, "does not look like a Sluice data directory", true},
	}
	for _, c := range cases {
		var out bytes.Buffer
		_, err := Run(m, c.o, &out)
		switch {
		case c.err && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: error %v, want one saying %q", c.o, err, c.want)
		case !c.err && (err != nil || out.String() != c.want):
			t.Errorf("%+v: %v, output %q, want %q", c.o, err, out.String(), c.want)
		}
	}
	u, err := storage.LockDir(m, "/data")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Unlock()
	if _, err := Run(m, Options{Data: "/data", Partition: -1}, &bytes.Buffer{}); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("Run on a locked directory: %v, want ErrLocked", err)
	}
}
