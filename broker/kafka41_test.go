package broker

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// kafka41Difference is one row of the README's table of deliberate
// differences from a Kafka 4.1 broker's client listener.
type kafka41Difference struct {
	key    int16
	sluice int16 // Sluice's max version; -1 when not served
	reason string
}

// readmeDifferences parses the table between the kafka41-differences
// markers of README.md: | key | API | Kafka 4.1 | Sluice | reason |.
func readmeDifferences(t *testing.T) map[int16]kafka41Difference {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	start := strings.Index(s, "<!-- kafka41-differences -->")
	end := strings.Index(s, "<!-- /kafka41-differences -->")
	if start < 0 || end < start {
		t.Fatal("README.md has no kafka41-differences table")
	}
	row := regexp.MustCompile(`^\| (\d+) \| [A-Za-z]+ \| v(\d+) \| (v\d+|none) \| (.+) \|$`)
	out := map[int16]kafka41Difference{}
	for _, line := range strings.Split(s[start:end], "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		key, _ := strconv.Atoi(m[1])
		d := kafka41Difference{key: int16(key), sluice: -1, reason: strings.TrimSpace(m[4])}
		if m[3] != "none" {
			v, _ := strconv.Atoi(m[3][1:])
			d.sluice = int16(v)
		}
		if d.reason == "" {
			t.Errorf("README difference for key %d gives no reason", key)
		}
		out[d.key] = d
	}
	if len(out) == 0 {
		t.Fatal("README.md's kafka41-differences table has no rows")
	}
	return out
}

// askVersions sends ApiVersions v4 to the broker and returns its answer.
func askVersions(t *testing.T, tb *testBroker) *kversion.Versions {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "sluice-test", "1"
	resp, err := req.RequestWith(t.Context(), tb.client())
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions error %d", resp.ErrorCode)
	}
	return kversion.FromApiVersionsResponse(resp)
}

// TestKafka41Versions compares every key and max version Sluice
// advertises with Kafka 4.1's broker: each difference must be a row of
// the README's table, with Sluice's version as the table says, and each
// row a real difference.
func TestKafka41Versions(t *testing.T) {
	tb := startTest(t)
	ours := askVersions(t, tb)
	diffs := readmeDifferences(t)
	seen := map[int16]bool{}
	kversion.V4_1_0().EachMaxKeyVersion(func(k, kafka int16) {
		seen[k] = true
		got, ok := ours.LookupMaxKeyVersion(k)
		if !ok {
			got = -1
		}
		d, listed := diffs[k]
		switch {
		case got == kafka && listed:
			t.Errorf("%s (key %d): v%d as Kafka 4.1, yet the README lists it as a difference", kmsg.NameForKey(k), k, got)
		case got == kafka:
		case !listed:
			t.Errorf("%s (key %d): Sluice v%d, Kafka 4.1 v%d, and the README does not list the difference", kmsg.NameForKey(k), k, got, kafka)
		case d.sluice != got:
			t.Errorf("%s (key %d): the README says Sluice serves v%d, it advertises v%d", kmsg.NameForKey(k), k, d.sluice, got)
		}
	})
	ours.EachMaxKeyVersion(func(k, v int16) {
		if !seen[k] {
			t.Errorf("%s (key %d) v%d is advertised, but Kafka 4.1's client listener does not serve it", kmsg.NameForKey(k), k, v)
		}
	})
	for k := range diffs {
		if !seen[k] {
			t.Errorf("the README lists key %d, which Kafka 4.1 does not serve", k)
		}
	}
}

// TestKafka41VersionGuess: franz-go's version probe, which consoles and
// exporters use, calls Sluice Kafka 4.1 once the keys of the README's
// known differences (the KIP-848 and share-group work) are set aside, as
// it sets aside the broker-internal keys by default.
func TestKafka41VersionGuess(t *testing.T) {
	tb := startTest(t)
	ours := askVersions(t, tb)
	skip := []int16{4, 5, 6, 7, 27, 56, 57, 58, 67, 71, 72} // kversion's default skips
	for k := range readmeDifferences(t) {
		skip = append(skip, k)
	}
	got := ours.VersionGuess(kversion.SkipKeys(skip...))
	if got != "v4.1" && !strings.HasPrefix(got, "at least v4.") {
		t.Fatalf("kversion guesses %q, want v4.1 or later", got)
	}
}

// TestListConfigResources: v1 lists the topics, the broker and its
// loggers; v0 (client metrics only) and the CLIENT_METRICS and GROUP types
// list nothing, as no such resource exists; an unknown type is refused.
func TestListConfigResources(t *testing.T) {
	tb := startTest(t)
	ctx := t.Context()
	cl := tb.client()
	if err := tb.b.CreateTopic(ctx, "listed", 1, nil); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrListConfigResourcesRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("all types: %+v, %v", resp, err)
	}
	got := map[string]bool{}
	for _, r := range resp.ConfigResources {
		got[kmsg.ConfigResourceType(r.Type).String()+" "+r.Name] = true
	}
	for _, w := range []string{"TOPIC listed", "TOPIC __consumer_offsets", "BROKER 0", "BROKER_LOGGER 0"} {
		if !got[w] {
			t.Errorf("%q not listed in %v", w, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("listed %v, want only the four", got)
	}
	req.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeClientMetrics), int8(kmsg.ConfigResourceTypeGroupConfig)}
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 || len(resp.ConfigResources) != 0 {
		t.Fatalf("client metrics and groups: %+v, %v", resp, err)
	}
	req.ResourceTypes = []int8{1}
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("type 1: %+v, %v", resp, err)
	}
	v0 := kmsg.NewPtrListConfigResourcesRequest()
	v0.Version = 0
	if resp := dialRaw(t, tb.addr).roundTrip(v0).(*kmsg.ListConfigResourcesResponse); resp.ErrorCode != 0 || len(resp.ConfigResources) != 0 {
		t.Fatalf("v0: %+v", resp)
	}
}
