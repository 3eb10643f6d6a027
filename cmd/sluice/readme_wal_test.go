package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

// TestREADMEWALSpace writes one record and checks that the data
// directory's write-ahead log segments take what the README says.
func TestREADMEWALSpace(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`data\s+directory holds (\d+) MiB of write-ahead log segments`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README does not say how much the write-ahead log takes")
	}
	want, _ := strconv.ParseInt(string(m[1]), 10, 64)
	dir := t.TempDir()
	b := brokertest.Start(t, broker.DataDir(dir))
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("wal-space"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("one")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var total int64
		filepath.WalkDir(filepath.Join(dir, "wal"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".wal") {
				if fi, err := d.Info(); err == nil {
					total += fi.Size()
				}
			}
			return nil
		})
		if total == want<<20 {
			return
		}
		if time.Now().After(deadline) || total > want<<20 {
			t.Fatalf("the write-ahead log takes %d bytes, the README says %d MiB", total, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
