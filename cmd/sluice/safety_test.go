package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

// runSluice runs the sluice command with args and returns its combined
// output and exit error.
func runSluice(t *testing.T, args string) (string, error) {
	t.Helper()
	out, err := sluiceCmd(strings.Fields(args)...).CombinedOutput()
	return string(out), err
}

// dirState lists every file under dir with its size and modification
// time.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %d\n", p, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestServeLock: a second `sluice serve` on a directory in use exits
// non-zero at once, naming the directory and the holder's pid, and
// changes nothing; after the first is killed with SIGKILL, a new serve
// starts (the kernel released the lock).
func TestServeLock(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	cmd, stderr := startServe(t, dir, addr)
	// A request answered means Start finished (the group coordinator's
	// files exist): the directory is quiet from here on.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	before := dirState(t, dir)
	second := sluiceCmd("serve")
	second.Env = append(second.Env, "SLUICE_DATA="+dir, "SLUICE_LISTEN="+freeAddr(t))
	out, err := second.CombinedOutput()
	if err == nil {
		t.Fatalf("a second serve on %s exited 0:\n%s", dir, out)
	}
	want := fmt.Sprintf("data directory %s is in use", dir)
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), fmt.Sprintf("process %d", cmd.Process.Pid)) {
		t.Fatalf("second serve said %q; want %q and the holder's pid %d", out, want, cmd.Process.Pid)
	}
	if after := dirState(t, dir); after != before {
		t.Fatalf("the refused serve changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if out, err := runSluice(t, "repair --data "+dir); err == nil || !strings.Contains(out, "is in use") {
		t.Fatalf("repair on a directory in use: %v %q; want a refusal", err, out)
	}
	cmd.Process.Kill()
	cmd.Wait()
	cmd, stderr = startServe(t, dir, addr)
	stopServe(t, cmd, stderr)
}

// TestRepairCommand: a segment corrupted in the middle stops the broker
// with a message naming the segment, the offset and the byte and giving
// the repair command; `sluice repair` reports it, then with
// --truncate-after-corruption cuts the log, and the broker starts with
// the records before the corruption intact.
func TestRepairCommand(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.New(broker.DataDir(dir), broker.ListenAddr("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]byte
	for i := 0; i < 3; i++ {
		bt := storagetest.MakeBatch(10, 100, int64(1000*(i+1)))
		batches = append(batches, bt)
		if _, err := b.AppendBatch(context.Background(), "t", 0, bt, -1); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash would leave no clean-shutdown checkpoint, so that the next
	// start checks the active segment; flip a byte inside the second batch.
	pdir := filepath.Join(dir, "topics", "t", "0")
	os.Remove(filepath.Join(pdir, "clean-shutdown"))
	seg := filepath.Join(pdir, "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	bad := len(batches[0])
	data[bad+len(batches[1])/2] ^= 0xff
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}

	_, err = broker.New(broker.DataDir(dir), broker.ListenAddr("127.0.0.1:0"))
	if err == nil {
		t.Fatal("the broker started on a corrupt segment")
	}
	for _, want := range []string{seg, fmt.Sprintf("at byte %d", bad), "expected offset 10",
		"sluice repair --data " + dir + " --topic t --partition 0 --truncate-after-corruption"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("start-up error %q does not say %q", err, want)
		}
	}

	out, err := runSluice(t, "repair --data "+dir)
	if err == nil || !strings.Contains(out, "would remove offsets from 10 (valid batches up to offset 29 after it)") {
		t.Fatalf("repair without --truncate-after-corruption: %v\n%s", err, out)
	}
	out, err = runSluice(t, "repair --data "+dir+" --topic t --partition 0 --truncate-after-corruption")
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	removed := len(data) - bad
	for _, want := range []string{fmt.Sprintf("removed offsets from 10 (valid batches up to offset 29 after it), %d bytes", removed),
		"kept a copy at " + seg + ".broken"} {
		if !strings.Contains(out, want) {
			t.Fatalf("repair output does not say %q:\n%s", want, out)
		}
	}
	if kept, err := os.ReadFile(seg + ".broken"); err != nil || !bytes.Equal(kept, data) {
		t.Fatalf("the copy kept differs from the corrupt segment (%v)", err)
	}

	b, err = broker.New(broker.DataDir(dir), broker.ListenAddr("127.0.0.1:0"))
	if err != nil {
		t.Fatalf("broker after repair: %v", err)
	}
	defer b.Close()
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < 10 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 10 records after repair", len(got))
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		if r.Offset != int64(i) || r.Timestamp.UnixMilli() != 1000+int64(i) || len(r.Value) != 100 {
			t.Fatalf("record %d after repair: offset %d ts %d, %d value bytes", i, r.Offset, r.Timestamp.UnixMilli(), len(r.Value))
		}
	}
	if hw, _ := b.AppendBatch(context.Background(), "t", 0, batches[2], -1); hw != 10 {
		t.Fatalf("next append after repair got offset %d, want 10", hw)
	}
}

// TestServeDiskGuard: with --disk-low-watermark above the free space,
// serve refuses produce with KAFKA_STORAGE_ERROR and logs the crossing.
func TestServeDiskGuard(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	cmd, stderr := startServe(t, dir, addr, "SLUICE_DISK_LOW_WATERMARK=9223372036854775807")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("guarded"), kgo.AllowAutoTopicCreation(),
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce below the watermark: %v, want KAFKA_STORAGE_ERROR", err)
	}
	stopServe(t, cmd, stderr) // stderr is complete once serve has exited
	if !strings.Contains(stderr.String(), "disk guard: free space below the low watermark") {
		t.Fatalf("no disk guard log line:\n%s", stderr.String())
	}
}
