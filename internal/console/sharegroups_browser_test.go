package console

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareGroupInBrowser: the groups page lists the share group with
// its type beside a classic group, and the share group's page shows the
// member, the share partition's start and end offsets and lag, and its
// records in flight by state that a real kgo share consumer left; a
// classic group's page shows its type and generation, a consumer-protocol
// (KIP-848) group's its epochs and the member's epoch.
func TestShareGroupInBrowser(t *testing.T) {
	e := shareEnv(t)
	shareScene(t, e)
	g := waitShareState(t, e) // the broker has applied the acknowledgements

	b := newBrowser(t, e.url)

	cells := func(sel string) string {
		return eval[string](b, `[...document.querySelectorAll('`+sel+` tbody tr')].map(r => [...r.cells].map(c => c.textContent).join("|")).join("\n")`)
	}

	t.Run("groups", func(t *testing.T) {
		b.t = t
		b.open("#/groups")
		got := cells("#groups-table")
		want := fmt.Sprintf("billing|classic|Empty|–|0|0|1|6\nworkers|share|Stable|simple|%d|1|1|8", g.Group.Epoch)
		if got != want {
			t.Errorf("groups table (group|type|state|protocol|epoch|members|topics|lag):\n%s\nwant\n%s", got, want)
		}
		b.screenshot("share-groups")
		b.noErrors("groups")
	})

	t.Run("share group", func(t *testing.T) {
		b.t = t
		b.open("#/groups/workers")
		if s := b.text("#group-cards"); !strings.Contains(s, "share") || !strings.Contains(s, "Stable") || !strings.Contains(s, "simple") {
			t.Errorf("share group cards: %s", s)
		}
		if got := cells("#share-partitions-table"); got != "jobs|0|0|10|8|ok" {
			t.Errorf("share partitions (topic|partition|start|end|lag|status) = %q, want %q", got, "jobs|0|0|10|8|ok")
		}
		if got, want := cells("#share-records-table"), "jobs|0|6|2|1|1"; got != want {
			t.Errorf("records in flight (topic|partition|acquired|available|acknowledged|archived) = %q, want %q", got, want)
		}
		member := cells("#members-table")
		if f := strings.Split(member, "|"); len(f) != 5 || f[1] != "worker-1" || f[0] == "" || f[2] == "" || f[4] != "jobs: 0" {
			t.Errorf("members table (member|client|host|epoch|assigned) = %q", member)
		}
		b.screenshot("share-group")
		b.noErrors("share group")
	})

	t.Run("classic group", func(t *testing.T) {
		b.t = t
		b.open("#/groups/billing")
		if s := b.text("#group-cards"); !strings.Contains(s, "classic") || !strings.Contains(strings.ToLower(s), "generation") {
			t.Errorf("classic group cards: %s", s)
		}
		if got := cells("#offsets-table"); got != "jobs|0|4|10|6" {
			t.Errorf("offsets table = %q", got)
		}
		b.noErrors("classic group")
	})

	t.Run("consumer group", func(t *testing.T) {
		b.t = t
		cl := e.client(t, kgo.ConsumerGroup("next"), kgo.ConsumeTopics("jobs"), kgo.ClientID("reader-848"),
			kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		for got := 0; got < 10; {
			fs := cl.PollFetches(context.Background())
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			got += fs.NumRecords()
		}
		b.open("#/groups/next")
		b.wait(`document.querySelectorAll('#members-table tbody tr td').length === 5`)
		if s := strings.ToLower(b.text("#group-cards")); !strings.Contains(s, "consumer") || !strings.Contains(s, "group epoch / assignment epoch") {
			t.Errorf("consumer group cards: %s", s)
		}
		if f := strings.Split(cells("#members-table"), "|"); len(f) != 5 || f[1] != "reader-848" || f[3] == "" || f[3] == "0" || f[4] != "jobs: 0" {
			t.Errorf("members table (member|client|host|epoch|assigned) = %q", f)
		}
		b.noErrors("consumer group")
	})
}
