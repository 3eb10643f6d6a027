package txn

import (
	"slices"
	"testing"
)

// TestAddCopiesOnWrite: a state made with shallow shares its slices with
// the published one, so add must leave those untouched even when they
// have room to grow in place.
func TestAddCopiesOnWrite(t *testing.T) {
	parts := make([]TopicPartition, 2, 8)
	parts[0], parts[1] = TopicPartition{"a", 0}, TopicPartition{"c", 0}
	since := make([]int64, 2, 8)
	since[0], since[1] = 10, 30
	pub := &Txn{ID: "x", State: Ongoing, Partitions: parts, Since: since}
	next := pub.shallow()
	if !next.add(TopicPartition{"b", 0}, 20) {
		t.Fatal("add of a new partition reported false")
	}
	if want := []TopicPartition{{"a", 0}, {"b", 0}, {"c", 0}}; !slices.Equal(next.Partitions, want) {
		t.Fatalf("new state's partitions %v, want %v", next.Partitions, want)
	}
	if want := []int64{10, 20, 30}; !slices.Equal(next.Since, want) {
		t.Fatalf("new state's since %v, want %v", next.Since, want)
	}
	if want := []TopicPartition{{"a", 0}, {"c", 0}}; !slices.Equal(pub.Partitions, want) || !slices.Equal(parts[:3], []TopicPartition{{"a", 0}, {"c", 0}, {}}) {
		t.Fatalf("published partitions changed: %v (backing %v)", pub.Partitions, parts[:3])
	}
	if !slices.Equal(pub.Since, []int64{10, 30}) || !slices.Equal(since[:3], []int64{10, 30, 0}) {
		t.Fatalf("published since changed: %v (backing %v)", pub.Since, since[:3])
	}
	if next.add(TopicPartition{"b", 0}, 99) {
		t.Fatal("add of a partition already there reported true")
	}
}
