package integration

import (
	"strings"
	"testing"

	"github.com/IBM/sarama"
)

// TestSaramaTransactionsKcatReadCommitted produces with sarama's
// transactional producer (commits and an abort) and reads the topic with
// kcat (librdkafka): read_committed sees only the committed records,
// read_uncommitted also the aborted ones, and neither sees the markers.
func TestSaramaTransactionsKcatReadCommitted(t *testing.T) {
	n := startNode(t)
	const topic = "sarama-txn"
	createTopic(t, n, topic, 1)

	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = "sarama-tx"
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer([]string{n.addr}, cfg)
	if err != nil {
		t.Fatalf("sarama transactional producer: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			p.Close()
		}
	}()
	txn := func(commit bool, values ...string) {
		t.Helper()
		if err := p.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn: %v", err)
		}
		for _, v := range values {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatalf("send %s: %v", v, err)
			}
		}
		if commit {
			err = p.CommitTxn()
		} else {
			err = p.AbortTxn()
		}
		if err != nil {
			t.Fatalf("end (commit=%v): %v", commit, err)
		}
	}
	txn(true, "c1", "c2", "c3")
	txn(false, "a1", "a2")
	txn(true, "c4")
	closed = true
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	n.restart()

	// The same reads with franz-go, so the test checks Sluice even
	// where kcat is absent.
	if got, want := readUntil(t, n.addr, topic, true, "c4"), "c1 c2 c3 c4"; got != want {
		t.Fatalf("franz-go read_committed: %q, want %q", got, want)
	}
	if got, want := readUntil(t, n.addr, topic, false, "c4"), "c1 c2 c3 a1 a2 c4"; got != want {
		t.Fatalf("franz-go read_uncommitted: %q, want %q", got, want)
	}

	kcat := needKcat(t)
	read := func(iso string) string {
		// The README's command.
		out := runKcat(t, kcat, "", "-b", n.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-X", "isolation.level="+iso)
		return strings.Join(strings.Fields(out), " ")
	}
	if got, want := read("read_committed"), "c1 c2 c3 c4"; got != want {
		t.Fatalf("kcat read_committed: %q, want %q", got, want)
	}
	if got, want := read("read_uncommitted"), "c1 c2 c3 a1 a2 c4"; got != want {
		t.Fatalf("kcat read_uncommitted: %q, want %q", got, want)
	}
}
