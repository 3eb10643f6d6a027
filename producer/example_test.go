package producer_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/producer"
)

// memSink is an in-memory partition: records get consecutive offsets.
type memSink struct {
	mu  sync.Mutex // guards log
	log []producer.Record
}

func (s *memSink) Produce(_ context.Context, b producer.Batch) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	offs := make([]int64, len(b.Records))
	for i, r := range b.Records {
		offs[i] = int64(len(s.log))
		s.log = append(s.log, r)
	}
	return offs, nil
}

func Example() {
	p, err := producer.NewRecordProducer(producer.WithSink(&memSink{}))
	if err != nil {
		panic(err)
	}
	defer p.Close(context.Background())
	for _, v := range []string{"a", "b", "c"} {
		off, err := p.Produce(context.Background(), producer.Record{Value: []byte(v)})
		if err != nil {
			panic(err)
		}
		fmt.Println(v, "at offset", off)
	}
	// Output:
	// a at offset 0
	// b at offset 1
	// c at offset 2
}

// Produce through franz-go to any Kafka-compatible cluster; here an
// in-memory kfake cluster.
func ExampleKafkaSink() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), // the sink picks the partition
	)
	if err != nil {
		panic(err)
	}
	defer cl.Close()

	p, err := producer.NewRecordProducer(
		producer.WithSink(producer.NewKafkaSink(cl, "events", 0)),
		producer.Linger(2*time.Millisecond),
	)
	if err != nil {
		panic(err)
	}
	for _, v := range []string{"x", "y"} {
		off, err := p.Produce(context.Background(), producer.Record{Value: []byte(v)})
		fmt.Println(v, off, err)
	}
	fmt.Println(p.Close(context.Background()))
	// Output:
	// x 0 <nil>
	// y 1 <nil>
	// <nil>
}

// packer is a custom Aggregator that packs many small inputs into few
// records: each record's value is a sequence of uvarint-length-prefixed
// inputs, up to maxRecord bytes. An input's status is the offset of its
// record and its position inside it.
type packer struct {
	maxRecord int
	recs      [][]byte // the batch's records, the last one being filled
	count     []int    // inputs per record
}

type packTag struct{ rec, pos int }

// PackedStatus locates an input in the log.
type PackedStatus struct {
	Offset int64 // the record's offset
	Pos    int   // the input's position in the record
}

func (a *packer) TryPush(in []byte) (packTag, error) {
	need := binary.MaxVarintLen64 + len(in)
	if need > a.maxRecord {
		return packTag{}, producer.ErrTooLarge
	}
	if len(a.recs) == 0 || len(a.recs[len(a.recs)-1])+need > a.maxRecord {
		if len(a.recs) == 64 { // at most 64 records per batch
			return packTag{}, producer.ErrNoCapacity
		}
		a.recs = append(a.recs, make([]byte, 0, a.maxRecord))
		a.count = append(a.count, 0)
	}
	last := len(a.recs) - 1
	a.recs[last] = binary.AppendUvarint(a.recs[last], uint64(len(in)))
	a.recs[last] = append(a.recs[last], in...)
	a.count[last]++
	return packTag{last, a.count[last] - 1}, nil
}

func (a *packer) Flush() ([]producer.Record, producer.StatusDeaggregator[packTag, PackedStatus], error) {
	recs := make([]producer.Record, len(a.recs))
	for i, v := range a.recs {
		recs[i] = producer.Record{Value: v}
	}
	a.recs, a.count = nil, nil
	return recs, packedDeagg{}, nil
}

type packedDeagg struct{}

func (packedDeagg) Deaggregate(offsets []int64, t packTag) (PackedStatus, error) {
	return PackedStatus{Offset: offsets[t.rec], Pos: t.pos}, nil
}

// unpack returns the pos'th input packed in a record's value.
func unpack(value []byte, pos int) []byte {
	for i := 0; ; i++ {
		n, w := binary.Uvarint(value)
		in := value[w : w+int(n)]
		if i == pos {
			return in
		}
		value = value[w+int(n):]
	}
}

// A custom aggregator packs many small inputs into one record, so a batch
// of concurrent inputs costs the broker a few records instead of one each.
func Example_packing() {
	sink := &memSink{}
	p, err := producer.New[[]byte, packTag, PackedStatus](&packer{maxRecord: 1000}, producer.WithSink(sink))
	if err != nil {
		panic(err)
	}
	statuses := make([]PackedStatus, 100)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := p.Produce(context.Background(), []byte(fmt.Sprintf("input-%d", i)))
			if err != nil {
				panic(err)
			}
			statuses[i] = s
		}()
	}
	wg.Wait()
	if err := p.Close(context.Background()); err != nil {
		panic(err)
	}
	found := 0
	for i, s := range statuses {
		if string(unpack(sink.log[s.Offset].Value, s.Pos)) == fmt.Sprintf("input-%d", i) {
			found++
		}
	}
	fmt.Printf("%d of %d inputs found at their status\n", found, len(statuses))
	// Output:
	// 100 of 100 inputs found at their status
}
