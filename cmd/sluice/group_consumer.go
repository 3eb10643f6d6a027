package main

// Consumer-protocol (KIP-848) groups in the command line: consume -G with
// --group-protocol consumer, and group describe of a consumer group.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupProtocolFlags are consume's group-protocol flags, named after the
// consumer settings group.protocol and group.remote.assignor.
type groupProtocolFlags struct {
	protocol, assignor *string
}

func addGroupProtocolFlags(fs *pflag.FlagSet) groupProtocolFlags {
	return groupProtocolFlags{
		protocol: fs.String("group-protocol", "classic", "with -G: classic, or consumer for the broker-side assignment of KIP-848"),
		assignor: fs.String("group-remote-assignor", "uniform", "with --group-protocol consumer: the broker's assignor, uniform or range"),
	}
}

func (f groupProtocolFlags) opts() ([]kgo.Opt, error) {
	switch *f.protocol {
	case "classic":
		return nil, nil
	case "consumer":
	default:
		return nil, usagef("consume: --group-protocol %q: want classic or consumer", *f.protocol)
	}
	switch *f.assignor {
	case "uniform":
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}, nil
	case "range":
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}, nil
	}
	return nil, usagef("consume: --group-remote-assignor %q: want uniform or range", *f.assignor)
}

// describeConsumerGroup prints a consumer-protocol group: its epochs,
// each member's epoch, assignment and target, and the lag per
// partition. It reports false when no such group exists.
func describeConsumerGroup(ctx context.Context, c *conn, name string, out io.Writer, blankFirst bool) (bool, error) {
	ds, err := c.adm.DescribeConsumerGroups(ctx, name)
	if err != nil {
		var se *kadm.ShardErrors
		if errors.As(err, &se) || errors.Is(err, kerr.UnsupportedVersion) {
			return false, nil
		}
		return false, c.wrap("group describe", err)
	}
	d, ok := ds[name]
	switch {
	case !ok || errors.Is(d.Err, kerr.GroupIDNotFound):
		return false, nil
	case d.Err != nil:
		return false, fmt.Errorf("group describe %s: %w", name, d.Err)
	}
	if blankFirst {
		fmt.Fprintln(out)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "GROUP\t%s\nTYPE\tconsumer\nSTATE\t%s\nEPOCH\t%d\nASSIGNMENT EPOCH\t%d\nASSIGNOR\t%s\nMEMBERS\t%d\n",
		name, d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName, len(d.Members))
	tw.Flush()
	owner := map[string]string{}
	if len(d.Members) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER\tINSTANCE\tPROTOCOL\tEPOCH\tCLIENT\tHOST\tASSIGNED\tTARGET")
		for _, m := range d.Members {
			inst := "-"
			if m.InstanceID != nil {
				inst = *m.InstanceID
			}
			proto := "consumer" // KIP-1099's member type: 0 classic (a mixed group), 1 consumer
			if m.MemberType == 0 {
				proto = "classic"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", m.MemberID, inst, proto, m.MemberEpoch, m.ClientID, m.ClientHost,
				topicsSet(m.Assignment), topicsSet(m.TargetAssignment))
			for t, ps := range m.Assignment {
				for p := range ps {
					owner[t+"/"+strconv.Itoa(int(p))] = m.MemberID
				}
			}
		}
		tw.Flush()
	}
	committed, err := c.adm.FetchOffsets(ctx, name)
	if err != nil {
		return true, c.wrap("group describe", err)
	}
	var topics []string
	for t := range committed {
		topics = append(topics, t)
	}
	for _, m := range d.Members {
		for t := range m.Assignment {
			topics = append(topics, t)
		}
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER")
	if len(topics) > 0 {
		ends, err := c.adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return true, c.wrap("group describe", err)
		}
		var sorted []kadm.ListedOffset
		ends.Each(func(o kadm.ListedOffset) { sorted = append(sorted, o) })
		slices.SortFunc(sorted, func(a, b kadm.ListedOffset) int {
			if a.Topic != b.Topic {
				return strings.Compare(a.Topic, b.Topic)
			}
			return int(a.Partition - b.Partition)
		})
		for _, e := range sorted {
			cm, lag := "-", e.Offset
			if o, ok := committed.Lookup(e.Topic, e.Partition); ok && o.At >= 0 {
				cm, lag = strconv.FormatInt(o.At, 10), e.Offset-o.At
			}
			member := owner[e.Topic+"/"+strconv.Itoa(int(e.Partition))]
			if member == "" {
				member = "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\n", e.Topic, e.Partition, cm, e.Offset, lag, member)
		}
	}
	return true, tw.Flush()
}

// topicsSet formats a set of partitions as topic[0,1],other[2].
func topicsSet(s kadm.TopicsSet) string {
	var parts []string
	for t, ps := range s {
		var nums []int
		for p := range ps {
			nums = append(nums, int(p))
		}
		slices.Sort(nums)
		strs := make([]string, len(nums))
		for i, n := range nums {
			strs[i] = strconv.Itoa(n)
		}
		parts = append(parts, t+"["+strings.Join(strs, ",")+"]")
	}
	if len(parts) == 0 {
		return "-"
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
