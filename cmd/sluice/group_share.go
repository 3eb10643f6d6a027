package main

// Share groups (KIP-932) in group describe: members with their
// assignments, and each partition's share-partition start offset, end
// offset and lag.

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
)

// describeShareGroup prints share group name.
func describeShareGroup(ctx context.Context, c *conn, name string, out io.Writer, blankFirst bool) error {
	sctx, cancel := c.step(ctx)
	ds, err := c.adm.DescribeShareGroups(sctx, name)
	cancel()
	if err != nil {
		return c.wrap("group describe "+name, err)
	}
	d := ds[name]
	if d.Err != nil {
		return fmt.Errorf("group describe %s: %w", name, d.Err)
	}
	sctx, cancel = c.step(ctx)
	offs, err := c.adm.DescribeShareGroupOffsets(sctx, name)
	cancel()
	if err != nil {
		return c.wrap("group describe "+name+": share offsets", err)
	}
	o := offs[name]
	if o.Err != nil {
		return fmt.Errorf("group describe %s: share offsets: %w", name, o.Err)
	}
	if blankFirst {
		fmt.Fprintln(out)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "GROUP\t%s\nSTATE\t%s\nPROTOCOL\tshare/%s\nEPOCH\t%d\nMEMBERS\t%d\n", name, d.GroupState, d.Assignor, d.GroupEpoch, len(d.Members))
	tw.Flush()
	if len(d.Members) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER\tCLIENT\tHOST\tEPOCH\tASSIGNED")
		for _, m := range d.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", m.MemberID, m.ClientID, m.ClientHost, m.MemberEpoch, topicsSet(m.Assignment))
		}
		tw.Flush()
	}
	fmt.Fprintln(out)
	ends, err := c.adm.ListEndOffsets(ctx, topicsOf(o.Offsets)...)
	if err != nil {
		return c.wrap("group describe "+name+": end offsets", err)
	}
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTART\tEND\tLAG")
	for _, t := range topicsOf(o.Offsets) {
		ps := make([]int32, 0, len(o.Offsets[t]))
		for p := range o.Offsets[t] {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		for _, p := range ps {
			so := o.Offsets[t][p]
			end, lag := "-", "-"
			if e, ok := ends.Lookup(t, p); ok && e.Err == nil {
				end = strconv.FormatInt(e.Offset, 10)
			}
			if so.Lag >= 0 {
				lag = strconv.FormatInt(so.Lag, 10)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", t, p, so.StartOffset, end, lag)
		}
	}
	return tw.Flush()
}

// topicsOf lists the topics of share offsets, sorted.
func topicsOf(o kadm.ShareOffsets) []string {
	ts := make([]string, 0, len(o))
	for t := range o {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}
