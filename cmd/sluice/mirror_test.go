package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/broker/brokertest"
)

// lineWaiter is an io.Writer that keeps what is written and hands out the
// first match of a pattern.
type lineWaiter struct {
	mu    sync.Mutex // guards buf and sent
	buf   bytes.Buffer
	re    *regexp.Regexp
	found chan string
	sent  bool
}

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := w.re.FindStringSubmatch(w.buf.String()); m != nil && !w.sent {
		w.sent = true
		w.found <- m[1]
	}
	return len(p), nil
}

func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestMirrorCommand runs the README's cutover commands, Sluice to Sluice:
// a tailing mirror with metrics, then --once.
func TestMirrorCommand(t *testing.T) {
	src, tgt := brokertest.Start(t).Addr(), brokertest.Start(t).Addr()
	ok(t, "", "topic", "create", "orders", "-p", "2", "-b", src)
	ok(t, "a:1\nb:2\nc:3\n", "produce", "-t", "orders", "-K", ":", "-b", src)

	// sluice mirror --from SRC --to TGT --topics orders --http ADDR
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tctx, stop := context.WithCancel(ctx)
	stderr := &lineWaiter{re: regexp.MustCompile(`metrics at (http://\S+)`), found: make(chan string, 1)}
	var stdout syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(tctx, []string{"mirror", "--from", src, "--to", tgt, "--topics", "orders", "--interval", "20ms", "--http", "127.0.0.1:0"},
			strings.NewReader(""), &stdout, stderr)
	}()
	var url string
	select {
	case url = <-stderr.found:
	case code := <-done:
		t.Fatalf("mirror exited %d:\n%s", code, stderr.String())
	}
	// Wait (on the metrics themselves) until the three records are copied.
	for {
		body := get(t, ctx, url)
		if strings.Contains(body, `sluice_mirror_records_total{topic="orders"} 3`) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("metrics never showed 3 records:\n%s", body)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("tailing mirror exited %d:\n%s", code, stderr.String())
	}
	if s := stdout.String(); !strings.Contains(s, "records/s") || !strings.Contains(s, "lag orders=") ||
		!finished(s, 3) || !strings.Contains(s, "topic orders: 3 records, lag 0") {
		t.Fatalf("tailing mirror printed:\n%s", s)
	}

	// More records, then the drain: sluice mirror --from SRC --to TGT --once
	ok(t, "d:4\n", "produce", "-t", "orders", "-K", ":", "-b", src)
	if r := ok(t, "", "mirror", "--from", src, "--to", tgt, "--once"); !finished(r.stdout, 1) {
		t.Fatalf("mirror --once printed:\n%s", r.stdout)
	}
	r := ok(t, "", "consume", "-t", "orders", "-e", "-f", `%k=%v\n`, "-b", tgt)
	got := strings.Fields(r.stdout)
	sort.Strings(got)
	if strings.Join(got, " ") != "a=1 b=2 c=3 d=4" {
		t.Fatalf("target holds %q, want a=1 b=2 c=3 d=4", got)
	}

	// Bad input: usage errors exit 2, an unreachable cluster 1.
	fails(t, 2, "--from and --to are required", "", "mirror", "--from", src)
	fails(t, 2, "--topics", "", "mirror", "--from", src, "--to", tgt, "--topics", "(")
	fails(t, 1, "target 127.0.0.1:1 unreachable", "", "mirror", "--from", src, "--to", "127.0.0.1:1", "--timeout", "2s")
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func get(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// finished reports whether out has the final report of n records (in
// either mode: Sluice targets get transactions on their own schedule).
func finished(out string, n int) bool {
	return regexp.MustCompile(fmt.Sprintf(`mirror finished \((transactional|idempotent\+checkpoint)\): %d records`, n)).MatchString(out)
}
