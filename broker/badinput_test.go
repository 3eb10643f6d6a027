package broker

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

// healthy checks that the broker still serves a fresh client.
func healthy(t *testing.T, addr string) {
	t.Helper()
	c := dialRaw(t, addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Brokers) != 1 {
		t.Fatalf("metadata after bad input: %d brokers", len(resp.Brokers))
	}
	c.nc.Close()
}

func sizePrefixed(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// TestBadFramesCloseTheConnection sends requests the broker cannot
// answer in Kafka's terms; each must close the connection, and the broker
// must go on serving others.
func TestBadFramesCloseTheConnection(t *testing.T) {
	tb := startTest(t, MaxRequestBytes(64<<10))
	apiVersions := func(v int16) []byte {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version = v
		return frame(r, 1, "x")
	}
	produceV := func(v int16) []byte {
		r := produceReq("t", 1, storagetest.MakeBatch(1, 1, 1))
		r.Version = v
		return frame(r, 1, "x")
	}
	header := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 7)
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	cases := []struct {
		name  string
		bytes []byte
		close bool // close our side after sending (client vanishes)
	}{
		{name: "size too small for a header", bytes: sizePrefixed([]byte{0, 18, 0})},
		{name: "negative size", bytes: []byte{0xff, 0xff, 0xff, 0xf0, 0, 0}},
		{name: "oversized request", bytes: binary.BigEndian.AppendUint32(nil, 1<<20)},
		{name: "unknown API key", bytes: sizePrefixed(header(9999, 0))},
		{name: "unserved API key", bytes: sizePrefixed(header(kmsg.AlterPartition.Int16(), 0))},
		{name: "produce version below the minimum", bytes: produceV(2)},
		{name: "metadata version above the maximum", bytes: sizePrefixed(header(kmsg.Metadata.Int16(), 13))},
		{name: "client id past the end", bytes: sizePrefixed(append(header(18, 0)[:8], 0, 50, 'a'))},
		{name: "truncated body", bytes: sizePrefixed(produceV(7)[4:40])},
		{name: "garbage body", bytes: sizePrefixed(append(header(kmsg.Metadata.Int16(), 9), 0, 0xff, 0xff, 0xff, 0xff, 0x7f))},
		{name: "truncated frame, client vanishes", bytes: apiVersions(3)[:9], close: true},
		{name: "size only, client vanishes", bytes: []byte{0, 0, 1, 0}, close: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, tb.addr)
			c.send(tc.bytes)
			if tc.close {
				c.nc.Close()
			} else {
				c.expectClosed()
			}
			healthy(t, tb.addr)
		})
	}
}

// TestApiVersionsTooNew checks the downgrade path: a version above 4 is
// answered in v0 with UNSUPPORTED_VERSION and the supported ranges.
func TestApiVersionsTooNew(t *testing.T) {
	tb := startTest(t)
	c := dialRaw(t, tb.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 5 // kmsg knows it; the broker does not serve it
	c.corr = 41
	c.send(frame(req, 42, "new-client"))
	corr, body, err := c.readFrame()
	if err != nil || corr != 42 {
		t.Fatalf("read: corr %d err %v", corr, err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode as v0: %v", err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error code %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
	}
	want := map[int16][2]int16{
		kmsg.ApiVersions.Int16():      {0, 4},
		kmsg.Metadata.Int16():         {0, 13},
		kmsg.Produce.Int16():          {3, 13},
		kmsg.Fetch.Int16():            {4, 18},
		kmsg.ListOffsets.Int16():      {0, 10},
		kmsg.CreateTopics.Int16():     {0, 7},
		kmsg.DeleteTopics.Int16():     {0, 6},
		kmsg.CreatePartitions.Int16(): {0, 3},
		kmsg.InitProducerID.Int16():   {0, 5},
		kmsg.DescribeConfigs.Int16():  {0, 4},
		kmsg.DescribeCluster.Int16():  {0, 2},
		kmsg.AlterConfigs.Int16():     {0, 2},
		kmsg.DeleteRecords.Int16():    {0, 2},
		kmsg.DescribeLogDirs.Int16():  {0, 4},
		kmsg.JoinGroup.Int16():        {0, 9},
	}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for k, r := range want {
		if got[k] != r {
			t.Errorf("%s: v%d-%d advertised, want v%d-%d", kmsg.NameForKey(k), got[k][0], got[k][1], r[0], r[1])
		}
	}
	// The connection stays usable: the client retries at v3 (flexible
	// body, v0 header).
	req.Version = 3
	ok := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if ok.ErrorCode != 0 || len(ok.ApiKeys) != len(resp.ApiKeys) {
		t.Fatalf("ApiVersions v3: code %d, %d keys", ok.ErrorCode, len(ok.ApiKeys))
	}
}

// TestBadBatches sends well-formed Produce requests holding bad batches:
// each partition gets its own Kafka error, nothing is written, and the
// connection stays open.
func TestBadBatches(t *testing.T) {
	tb := startTest(t)
	if err := tb.b.CreateTopic(t.Context(), "bad", 1, map[string]string{"max.message.bytes": "2000"}); err != nil {
		t.Fatal(err)
	}
	good := func() []byte { return storagetest.MakeBatch(3, 20, 100) }
	mutate := func(f func(b []byte) []byte) []byte { return f(good()) }
	cases := []struct {
		name    string
		records []byte
		code    *kerr.Error
	}{
		{"no records", nil, kerr.CorruptMessage},
		{"bad CRC", mutate(func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }), kerr.CorruptMessage},
		{"wrong magic", mutate(func(b []byte) []byte { b[16] = 1; return b }), kerr.UnsupportedForMessageFormat},
		{"truncated batch", mutate(func(b []byte) []byte { return b[:len(b)-5] }), kerr.CorruptMessage},
		{"shorter than a header", mutate(func(b []byte) []byte { return b[:40] }), kerr.CorruptMessage},
		{"length field too small", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 10); return b }), kerr.CorruptMessage},
		{"trailing garbage", append(good(), 1, 2, 3), kerr.CorruptMessage},
		{"record count disagrees with lastOffsetDelta", storagetest.Build(storagetest.Spec{Records: 3, ValueSize: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Attributes: 0}), nil},
		{"larger than max.message.bytes", storagetest.MakeBatch(10, 300, 1), kerr.MessageTooLarge},
		{"transactional, producer unknown to the coordinator", storagetest.Build(storagetest.Spec{Records: 1, ProducerID: 5, ProducerEpoch: 0, BaseSequence: 0, Attributes: 0x10}), kerr.InvalidProducerIDMapping},
		{"transactional without a producer id", storagetest.Build(storagetest.Spec{Records: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Attributes: 0x10}), kerr.InvalidRecord},
		{"control batch", storagetest.Build(storagetest.Spec{Records: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Attributes: 0x20}), kerr.InvalidRecord},
	}
	// A record count that disagrees with lastOffsetDelta needs a rebuilt
	// CRC; patch the case above.
	cases[7].records = withCount(cases[7].records, 5)
	cases[7].code = kerr.InvalidRecord

	c := dialRaw(t, tb.addr)
	for _, tc := range cases {
		got := produceOne(c, "bad", tc.records)
		if got.ErrorCode != tc.code.Code {
			t.Errorf("%s: error %v, want %v", tc.name, kerr.ErrorForCode(got.ErrorCode), tc.code)
		}
		if got.ErrorMessage == nil || *got.ErrorMessage == "" {
			t.Errorf("%s: no error message", tc.name)
		}
	}
	if l := latestOffset(c, "bad"); l != 0 {
		t.Fatalf("bad batches wrote %d offsets", l)
	}
	// One request, two partitions of different fates: errors are per
	// partition.
	req := produceReq("bad", -1, good())
	p1 := req.Topics[0].Partitions[0]
	p1.Partition = 7
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	ps := resp.Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[0].BaseOffset != 0 || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("mixed request: %+v", ps)
	}
	// acks other than 0, 1, -1.
	req = produceReq("bad", 2, good())
	if code := c.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: code %v", kerr.ErrorForCode(code))
	}
}

// withCount rewrites a batch's record count and fixes its CRC.
func withCount(b []byte, n int32) []byte {
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	binary.BigEndian.PutUint32(b[17:], crc32c(b[21:]))
	return b
}

// TestConnectionLimits covers the connection limit and the idle timeout.
func TestConnectionLimits(t *testing.T) {
	tb := startTest(t, MaxConnections(1), IdleTimeout(300*time.Millisecond))
	first := dialRaw(t, tb.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	first.roundTrip(req) // the first connection is being served
	second := dialRaw(t, tb.addr)
	second.expectClosed() // over the limit
	first.expectClosed()  // idle past the timeout
	// With the idle connection gone, a new one is served.
	healthy(t, tb.addr)
}
