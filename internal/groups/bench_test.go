package groups

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/vfs"
)

// stormMember acts like a consumer's group loop against the coordinator:
// join (with the member-id round trip), sync (assigning if it leads),
// then heartbeat, rejoining whenever a rebalance is announced, until the
// group is Stable with all its members and this member holds the
// assignment of that generation.
func stormMember(ctx context.Context, c *Coordinator, group string, size int) error {
	memberID := ""
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		req := mkJoinReq(group, memberID, joinOpt{})
		jr := c.JoinGroup(ctx, Client{ID: "storm", Host: "/127.0.0.1"}, req)
		switch jr.ErrorCode {
		case 0:
		case errMemberIDRequired:
			memberID = jr.MemberID
			continue
		default:
			return fmt.Errorf("JoinGroup: code %d", jr.ErrorCode)
		}
		memberID = jr.MemberID
		sreq := kmsg.NewPtrSyncGroupRequest()
		sreq.Version = 5
		sreq.Group, sreq.MemberID, sreq.Generation = group, memberID, jr.Generation
		for _, m := range jr.Members {
			sreq.GroupAssignment = append(sreq.GroupAssignment,
				kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: []byte(m.MemberID)})
		}
		sr := c.SyncGroup(ctx, sreq)
		if sr.ErrorCode == errRebalanceInProgress {
			continue
		}
		if sr.ErrorCode != 0 {
			return fmt.Errorf("SyncGroup: code %d", sr.ErrorCode)
		}
		for {
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Group, hb.MemberID, hb.Generation = group, memberID, jr.Generation
			code := c.Heartbeat(ctx, hb).ErrorCode
			if code == errRebalanceInProgress {
				break
			}
			if code != 0 {
				return fmt.Errorf("Heartbeat: code %d", code)
			}
			d := c.DescribeGroups(ctx, &kmsg.DescribeGroupsRequest{Groups: []string{group}}).Groups[0]
			if d.State == "Stable" && len(d.Members) == size {
				return nil
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// BenchmarkJoinGroupStorm: 100 groups × 3 members join at once; one op is
// the whole storm until every group is Stable with its 3 members. The
// coordinator persists every assignment through the internal log on the
// OS filesystem with fsync.
func BenchmarkJoinGroupStorm(b *testing.B) {
	const groups, members = 100, 3
	c, err := Open(Config{FS: vfs.OS(), Dir: b.TempDir(), NodeID: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rebalances0 := counterValue(c.metrics.rebalances)
	round := 0
	for b.Loop() {
		round++
		var wg sync.WaitGroup
		errs := make(chan error, groups*members)
		for g := 0; g < groups; g++ {
			for m := 0; m < members; m++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := stormMember(ctx, c, fmt.Sprintf("storm-%d-%d", round, g), members); err != nil {
						errs <- err
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	b.ReportMetric((counterValue(c.metrics.rebalances)-rebalances0)/float64(round)/groups, "rebalances/group")
}

func TestJoinGroupStormCompletes(t *testing.T) {
	c, err := Open(Config{FS: vfs.NewMem(), Dir: "g", NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for g := 0; g < 20; g++ {
		for m := 0; m < 3; m++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := stormMember(ctx, c, fmt.Sprintf("g%d", g), 3); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	lg := c.ListGroups(ctx, &kmsg.ListGroupsRequest{Version: 4, StatesFilter: []string{"Stable"}})
	if len(lg.Groups) != 20 {
		t.Fatalf("%d stable groups, want 20", len(lg.Groups))
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
