package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeTopicPartitionsCursor pages through every topic with a
// partition limit, following NextCursor, as KIP-966's clients do.
func TestDescribeTopicPartitionsCursor(t *testing.T) {
	tb := startTest(t)
	ctx := t.Context()
	for name, n := range map[string]int32{"a": 3, "b": 2} {
		if err := tb.b.CreateTopic(ctx, name, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	cl := tb.client()
	page := func(topics []string, cursor *kmsg.DescribeTopicPartitionsRequestCursor, limit int32) *kmsg.DescribeTopicPartitionsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		for _, n := range topics {
			req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: n})
		}
		req.Cursor, req.ResponsePartitionLimit = cursor, limit
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	show := func(resp *kmsg.DescribeTopicPartitionsResponse) string {
		var parts []string
		for _, st := range resp.Topics {
			if st.ErrorCode != 0 {
				parts = append(parts, fmt.Sprintf("%s:%s", *st.Topic, kerr.TypedErrorForCode(st.ErrorCode).Message))
				continue
			}
			for _, sp := range st.Partitions {
				if sp.LeaderID != 0 || len(sp.Replicas) != 1 || len(sp.ISR) != 1 {
					t.Errorf("%s/%d: leader %d replicas %v isr %v", *st.Topic, sp.Partition, sp.LeaderID, sp.Replicas, sp.ISR)
				}
				parts = append(parts, fmt.Sprintf("%s/%d", *st.Topic, sp.Partition))
			}
		}
		s := strings.Join(parts, " ")
		if resp.NextCursor != nil {
			s += fmt.Sprintf(" -> %s/%d", resp.NextCursor.Topic, resp.NextCursor.Partition)
		}
		return s
	}
	// Every topic, two partitions a page: __consumer_offsets sorts first.
	var got []string
	var cur *kmsg.DescribeTopicPartitionsRequestCursor
	for range 10 {
		resp := page(nil, cur, 2)
		got = append(got, show(resp))
		if resp.NextCursor == nil {
			break
		}
		cur = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	want := []string{"__consumer_offsets/0 a/0 -> a/1", "a/1 a/2 -> b/0", "b/0 b/1"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("pages %q, want %q", got, want)
	}
	// Named topics: an unknown one is answered with its error, in order.
	if s := show(page([]string{"b", "nope", "a"}, nil, 10)); s != "a/0 a/1 a/2 b/0 b/1 nope:UNKNOWN_TOPIC_OR_PARTITION" {
		t.Fatalf("named: %q", s)
	}
	// The cursor's topic must be among those named.
	if s := show(page([]string{"a"}, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "b"}, 10)); s != "a:INVALID_REQUEST" {
		t.Fatalf("cursor outside the list: %q", s)
	}
	if s := show(page([]string{"a"}, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "a", Partition: 1}, 10)); s != "a/1 a/2" {
		t.Fatalf("named from a cursor: %q", s)
	}
}
