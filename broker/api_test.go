package broker

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

func fetchReq(version int16, topic string, id [16]byte, offset int64, maxWait int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MaxWaitMillis = maxWait
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	return req
}

// TestFetchVersions fetches the same stored batches at every encoding
// of the records field (non-flexible, flexible, topic ids) and checks the
// bytes are exactly the stored batches.
func TestFetchVersions(t *testing.T) {
	tb := startTest(t)
	ctx := context.Background()
	if err := tb.b.CreateTopic(ctx, "f", 1, nil); err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := 0; i < 3; i++ {
		b := storagetest.MakeBatch(2+i, 30, int64(1000*i))
		base, err := tb.b.AppendBatch(ctx, "f", 0, b, -1)
		if err != nil {
			t.Fatal(err)
		}
		withOff, _ := storagetest.WithBaseOffset(b, base)
		want = append(want, withOff...)
	}
	id := tb.b.lookup("f").id
	c := dialRaw(t, tb.addr)
	for _, v := range []int16{4, 7, 11, 12, 13} {
		resp := c.roundTrip(fetchReq(v, "f", id, 0, 0)).(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: response shape %+v", v, resp)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 9 || (v >= 5 && p.LogStartOffset != 0) {
			t.Fatalf("v%d: code %d hw %d start %d", v, p.ErrorCode, p.HighWatermark, p.LogStartOffset)
		}
		if !bytes.Equal(p.RecordBatches, want) {
			t.Fatalf("v%d: %d record bytes differ from the %d stored", v, len(p.RecordBatches), len(want))
		}
		// From the middle of the second batch: whole batches from it on.
		resp = c.roundTrip(fetchReq(v, "f", id, 3, 0)).(*kmsg.FetchResponse)
		if got := resp.Topics[0].Partitions[0].RecordBatches; !bytes.Equal(got, want[len(storagetest.MakeBatch(2, 30, 0)):]) {
			t.Fatalf("v%d from offset 3: %d bytes", v, len(got))
		}
		// Past the end: OFFSET_OUT_OF_RANGE. At the end: empty.
		resp = c.roundTrip(fetchReq(v, "f", id, 10, 0)).(*kmsg.FetchResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.OffsetOutOfRange.Code {
			t.Fatalf("v%d past the end: %v", v, kerr.ErrorForCode(code))
		}
		resp = c.roundTrip(fetchReq(v, "f", id, 9, 0)).(*kmsg.FetchResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
			t.Fatalf("v%d at the end: code %d, %d bytes", v, p.ErrorCode, len(p.RecordBatches))
		}
	}
	// Unknown topic (by name and by id).
	resp := c.roundTrip(fetchReq(11, "nope", [16]byte{}, 0, 0)).(*kmsg.FetchResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", kerr.ErrorForCode(code))
	}
	resp = c.roundTrip(fetchReq(13, "", [16]byte{1}, 0, 0)).(*kmsg.FetchResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %v", kerr.ErrorForCode(code))
	}
	// A session the broker never gave out.
	req := fetchReq(11, "f", id, 0, 0)
	req.SessionID, req.SessionEpoch = 5, 1
	if code := c.roundTrip(req).(*kmsg.FetchResponse).ErrorCode; code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: %v", kerr.ErrorForCode(code))
	}
}

// TestFetchLongPollWokenByProduce starts a fetch at the log end with a
// long MaxWait; an append must wake it with the new records.
func TestFetchLongPollWokenByProduce(t *testing.T) {
	tb := startTest(t)
	ctx := context.Background()
	if err := tb.b.CreateTopic(ctx, "lp", 1, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, tb.addr)
	got := make(chan *kmsg.FetchResponse, 1)
	go func() {
		// 60 s: if the append did not wake the poll, the response would
		// come late and empty.
		c.corr++
		c.send(frame(fetchReq(11, "lp", [16]byte{}, 0, 60000), c.corr, "lp"))
		_, body, err := c.readFrame()
		if err != nil {
			got <- nil
			return
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 11
		if resp.ReadFrom(body) != nil {
			got <- nil
			return
		}
		got <- resp
	}()
	b := storagetest.MakeBatch(4, 8, 77)
	// The append may land before or after the fetch is parked; either
	// way the fetch is answered with the records.
	if _, err := tb.b.AppendBatch(ctx, "lp", 0, b, -1); err != nil {
		t.Fatal(err)
	}
	resp := <-got
	if resp == nil {
		t.Fatal("fetch failed")
	}
	p := resp.Topics[0].Partitions[0]
	want, _ := storagetest.WithBaseOffset(b, 0)
	if p.ErrorCode != 0 || p.HighWatermark != 4 || !bytes.Equal(p.RecordBatches, want) {
		t.Fatalf("long poll answered code %d hw %d with %d bytes", p.ErrorCode, p.HighWatermark, len(p.RecordBatches))
	}
}

// TestCloseAnswersLongPoll closes the broker under a parked fetch: the
// fetch is answered (empty) and nothing leaks.
func TestCloseAnswersLongPoll(t *testing.T) {
	tb := startTest(t)
	if err := tb.b.CreateTopic(context.Background(), "cl", 1, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, tb.addr)
	c.send(frame(fetchReq(11, "cl", [16]byte{}, 0, 60000), 1, "cl"))
	// Close only once the fetch has been read (the connection is busy).
	for !connBusy(tb.b) {
		time.Sleep(time.Millisecond)
	}
	tb.stop()
	corr, body, err := c.readFrame()
	if err != nil || corr != 1 {
		t.Fatalf("parked fetch not answered at Close: corr %d err %v", corr, err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if n := len(resp.Topics[0].Partitions[0].RecordBatches); n != 0 {
		t.Fatalf("%d record bytes from an empty log", n)
	}
}

func listOffsetsReq(topic string, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 8
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = ts
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	return req
}

func TestListOffsets(t *testing.T) {
	tb := startTest(t)
	ctx := context.Background()
	if err := tb.b.CreateTopic(ctx, "lo", 1, nil); err != nil {
		t.Fatal(err)
	}
	// Offsets 0-4 have timestamps 100-104, 5-9 have 200-204, 10-12 have
	// 150-152 (so the max timestamp, 204, is at offset 9).
	for _, ts := range []int64{100, 200, 150} {
		n := 5
		if ts == 150 {
			n = 3
		}
		if _, err := tb.b.AppendBatch(ctx, "lo", 0, storagetest.MakeBatch(n, 4, ts), -1); err != nil {
			t.Fatal(err)
		}
	}
	c := dialRaw(t, tb.addr)
	cases := []struct {
		name       string
		ts         int64
		offset, at int64
	}{
		{"earliest", -2, 0, -1},
		{"latest", -1, 13, -1},
		{"max timestamp", -3, 9, 204},
		{"earliest local", -4, 0, -1},
		{"before everything", 0, 0, 100},
		{"inside the first batch", 103, 3, 103},
		{"between batches", 105, 5, 200},
		{"inside the second batch", 202, 7, 202},
		{"after everything", 205, -1, -1},
	}
	for _, tc := range cases {
		p := c.roundTrip(listOffsetsReq("lo", tc.ts)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.at {
			t.Errorf("%s: code %d offset %d timestamp %d; want offset %d timestamp %d", tc.name, p.ErrorCode, p.Offset, p.Timestamp, tc.offset, tc.at)
		}
	}
	if p := c.roundTrip(listOffsetsReq("none", -1)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %v", kerr.ErrorForCode(p.ErrorCode))
	}
}

// TestTopicAdmin creates, configures, grows and deletes topics, checking
// that metadata and configs persist across restarts.
func TestTopicAdmin(t *testing.T) {
	tb := startTest(t, AutoCreateTopics(false))
	c := dialRaw(t, tb.addr)
	str := func(s string) *string { return &s }
	create := func(name string, parts int32, rf int16, configs map[string]string, validateOnly bool) kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		req.ValidateOnly = validateOnly
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, rf
		for k, v := range configs {
			rc := kmsg.NewCreateTopicsRequestTopicConfig()
			rc.Name, rc.Value = k, str(v)
			rt.Configs = append(rt.Configs, rc)
		}
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		return c.roundTrip(req).(*kmsg.CreateTopicsResponse).Topics[0]
	}
	cases := []struct {
		name    string
		topic   string
		parts   int32
		rf      int16
		configs map[string]string
		code    *kerr.Error
		msg     string
	}{
		{"unknown cleanup policy is rejected clearly", "c1", 1, 1, map[string]string{"cleanup.policy": "shred"}, kerr.InvalidConfig, "want delete, compact or compact,delete"},
		{"unknown config", "c2", 1, 1, map[string]string{"flush.bytes": "1"}, kerr.InvalidConfig, "unknown topic config"},
		{"bad retention", "c3", 1, 1, map[string]string{"retention.ms": "soon"}, kerr.InvalidConfig, "retention.ms"},
		{"replication factor 3", "c4", 1, 3, nil, kerr.InvalidReplicationFactor, "one broker"},
		{"zero partitions", "c5", 0, 1, nil, kerr.InvalidPartitions, ""},
		{"bad name", "a/b", 1, 1, nil, kerr.InvalidTopicException, "only ASCII"},
		{"valid", "cfg", 2, -1, map[string]string{"retention.ms": "3600000", "cleanup.policy": "delete", "max.message.bytes": "5000"}, nil, ""},
		{"already exists", "cfg", 1, 1, nil, kerr.TopicAlreadyExists, ""},
	}
	for _, tc := range cases {
		got := create(tc.topic, tc.parts, tc.rf, tc.configs, false)
		if tc.code == nil {
			if got.ErrorCode != 0 || got.NumPartitions != tc.parts || got.TopicID == [16]byte{} {
				t.Fatalf("%s: code %d parts %d msg %v", tc.name, got.ErrorCode, got.NumPartitions, ptrStr(got.ErrorMessage))
			}
			continue
		}
		if got.ErrorCode != tc.code.Code || !strings.Contains(ptrStr(got.ErrorMessage), tc.msg) {
			t.Fatalf("%s: code %v message %q; want %v containing %q", tc.name, kerr.ErrorForCode(got.ErrorCode), ptrStr(got.ErrorMessage), tc.code, tc.msg)
		}
	}
	if got := create("vo", 1, 1, nil, true); got.ErrorCode != 0 || tb.b.lookup("vo") != nil {
		t.Fatalf("validate-only created a topic or failed: %d", got.ErrorCode)
	}
	id := tb.b.lookup("cfg").id

	// max.message.bytes applies to produce.
	if got := produceOne(c, "cfg", storagetest.MakeBatch(10, 600, 1)); got.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("produce above max.message.bytes: %v", kerr.ErrorForCode(got.ErrorCode))
	}

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = 3
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "cfg", Count: 4}, {Topic: "none", Count: 2}}
	cpr := c.roundTrip(cp).(*kmsg.CreatePartitionsResponse)
	if cpr.Topics[0].ErrorCode != 0 || cpr.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("CreatePartitions: %+v", cpr.Topics)
	}
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "cfg", Count: 3}}
	if code := c.roundTrip(cp).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode; code != kerr.InvalidPartitions.Code {
		t.Fatalf("shrinking partitions: %v", kerr.ErrorForCode(code))
	}

	tb.restart()
	c = dialRaw(t, tb.addr)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mr := c.roundTrip(md).(*kmsg.MetadataResponse)
	if n := len(mr.Topics); n != 2 || !mr.Topics[0].IsInternal || *mr.Topics[0].Topic != "__consumer_offsets" || mr.Topics[1].IsInternal {
		t.Fatalf("metadata after restart: want __consumer_offsets (internal) and cfg, got %+v", mr.Topics)
	}
	if *mr.Topics[1].Topic != "cfg" || len(mr.Topics[1].Partitions) != 4 || mr.Topics[1].TopicID != id {
		t.Fatalf("metadata after restart: %+v", mr.Topics)
	}
	// Auto-creation is off: asking for an unknown topic does not create it.
	unknown := "unknown"
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &unknown}}
	md.AllowAutoTopicCreation = true
	if mr := c.roundTrip(md).(*kmsg.MetadataResponse); mr.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic with auto-creation off: %v", kerr.ErrorForCode(mr.Topics[0].ErrorCode))
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "cfg"}}
	dr := c.roundTrip(dc).(*kmsg.DescribeConfigsResponse).Resources[0]
	got := map[string]string{}
	for _, cfg := range dr.Configs {
		src := "default"
		if cfg.Source == kmsg.ConfigSourceDynamicTopicConfig {
			src = "set"
		}
		got[cfg.Name] = ptrStr(cfg.Value) + "/" + src
	}
	for k, v := range map[string]string{"retention.ms": "3600000/set", "max.message.bytes": "5000/set", "cleanup.policy": "delete/set", "retention.bytes": "-1/default", "segment.bytes": "1073741824/default"} {
		if got[k] != v {
			t.Errorf("DescribeConfigs %s = %q, want %q", k, got[k], v)
		}
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 6
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: id}, {Topic: &unknown}}
	drr := c.roundTrip(del).(*kmsg.DeleteTopicsResponse)
	if drr.Topics[0].ErrorCode != 0 || ptrStr(drr.Topics[0].Topic) != "cfg" || drr.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DeleteTopics: %+v", drr.Topics)
	}
	tb.restart()
	if tb.b.lookup("cfg") != nil {
		t.Fatal("deleted topic is back after restart")
	}
	// The name can be used again.
	if err := tb.b.CreateTopic(ctx(t), "cfg", 1, nil); err != nil {
		t.Fatal(err)
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

// connBusy reports whether some connection of b is serving a request.
func connBusy(b *Broker) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for c := range b.conns {
		c.mu.Lock()
		idle := c.idle
		c.mu.Unlock()
		if !idle {
			return true
		}
	}
	return false
}
