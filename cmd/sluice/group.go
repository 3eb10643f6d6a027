package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func newGroupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe, delete consumer groups and move their committed offsets",
		Args:  cobra.ArbitraryArgs,
		RunE:  runGroup,
	}
	cmd.AddCommand(newGroupListCmd(), newGroupDescribeCmd(), newGroupDeleteCmd(), newGroupSeekCmd(), newGroupConfigCmd())
	return cmd
}

func newGroupListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List groups with their state, type (classic, consumer) and protocol type",
		Args:    exactArgs(0, "no arguments"),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, _ []string, c *conn) error {
		groups, err := c.adm.ListGroups(ctx)
		if err != nil {
			return c.wrap("group list", err)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tSTATE\tTYPE\tPROTOCOL")
		for _, g := range groups.Sorted() {
			typ := g.GroupType // classic, consumer (KIP-848) or share
			if typ == "" {
				typ = "-" // a broker older than ListGroups v5
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Group, g.State, typ, g.ProtocolType)
		}
		return tw.Flush()
	})
	return cmd
}

// groupMissing reports whether a described group does not exist: Kafka
// answers an unknown group with state Dead and no error.
func groupMissing(state string, err error) bool {
	return state == "Dead" || errors.Is(err, kerr.GroupIDNotFound)
}

func newGroupDescribeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe GROUP...",
		Short: "Show groups' members, assignments, and committed offset, end offset and lag per partition",
		Args:  rangeArgs(1, -1, "one or more group names"),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, args []string, c *conn) error {
		lags, err := c.adm.Lag(ctx, args...)
		if err != nil {
			return c.wrap("group describe", err)
		}
		out := cmd.OutOrStdout()
		for i, name := range args {
			l, ok := lags[name]
			switch {
			case !ok || groupMissing(l.State, l.Error()):
				// Perhaps a consumer-protocol (KIP-848) group: group_consumer.go.
				if found, err := describeConsumerGroup(ctx, c, name, out, i > 0); found || err != nil {
					if err != nil {
						return err
					}
					continue
				}
				return fmt.Errorf("group describe: group %q does not exist", name)
			case l.Error() != nil:
				return fmt.Errorf("group describe %s: %w", name, l.Error())
			case l.ProtocolType == "share": // group_share.go
				if err := describeShareGroup(ctx, c, name, out, i > 0); err != nil {
					return err
				}
				continue
			}
			if i > 0 {
				fmt.Fprintln(out)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			proto := l.ProtocolType
			if l.Protocol != "" {
				proto += "/" + l.Protocol
			}
			fmt.Fprintf(tw, "GROUP\t%s\nSTATE\t%s\nPROTOCOL\t%s\nMEMBERS\t%d\n", name, l.State, proto, len(l.Members))
			tw.Flush()
			if len(l.Members) > 0 {
				fmt.Fprintln(out)
				tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "MEMBER\tCLIENT\tHOST\tASSIGNED")
				for _, m := range l.Members {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.MemberID, m.ClientID, m.ClientHost, assigned(m))
				}
				tw.Flush()
			}
			fmt.Fprintln(out)
			tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER")
			for _, pl := range l.Lag.Sorted() {
				member := "-"
				if pl.Member != nil {
					member = pl.Member.MemberID
				}
				committed, lag := "-", "-"
				if pl.Commit.At >= 0 {
					committed = strconv.FormatInt(pl.Commit.At, 10)
				}
				if pl.Lag >= 0 {
					lag = strconv.FormatInt(pl.Lag, 10)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", pl.Topic, pl.Partition, committed, pl.End.Offset, lag, member)
			}
			tw.Flush()
		}
		return nil
	})
	return cmd
}

// assigned formats a member's assignment as topic[0,1],other[2].
func assigned(m kadm.DescribedGroupMember) string {
	ca, ok := m.Assigned.AsConsumer()
	if !ok || len(ca.Topics) == 0 {
		return "-"
	}
	var parts []string
	for _, t := range ca.Topics {
		ps := make([]string, len(t.Partitions))
		sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i] < t.Partitions[j] })
		for i, p := range t.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, t.Topic+"["+strings.Join(ps, ",")+"]")
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func newGroupDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete empty groups and their committed offsets",
		Args:  rangeArgs(1, -1, "one or more group names"),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, args []string, c *conn) error {
		resps, err := c.adm.DeleteGroups(ctx, args...)
		if err != nil {
			return c.wrap("group delete", err)
		}
		var errs []error
		for _, name := range args {
			r, ok := resps[name]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("group delete %s: no answer for this group", name))
			case errors.Is(r.Err, kerr.GroupIDNotFound) && r.ErrMessage == "":
				errs = append(errs, fmt.Errorf("group delete: group %q does not exist", name))
			case r.Err != nil:
				errs = append(errs, fmt.Errorf("group delete %s: %w", name, fromBroker(r.Err, r.ErrMessage)))
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "deleted group %s\n", name)
			}
		}
		return errors.Join(errs...)
	})
	return cmd
}

func newGroupSeekCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "seek GROUP --to beginning|end|OFFSET|@TIMESTAMP [--topic TOPIC]",
		Short: "Move an empty group's committed offsets",
		Long: `Move an empty group's committed offsets, on every partition of TOPIC or,
without --topic, of every topic the group has committed offsets for.
--to takes beginning, end, an offset (clamped to each partition's range)
or @TIMESTAMP (milliseconds since the epoch or RFC 3339). The group must
have no members, as Kafka requires; an unknown group is an error unless
--topic names the topic to start it on.`,
		Example: `  sluice group seek billing --to beginning
  sluice group seek billing --to @2026-11-30T00:00:00Z --topic orders`,
		Args: exactArgs(1, "one group name"),
	}
	cf := addClientFlags(cmd)
	to := cmd.Flags().String("to", "", "where to: beginning, end, OFFSET or @TIMESTAMP (required)")
	topic := cmd.Flags().StringP("topic", "t", "", "the topic to seek (default: every topic the group has offsets for)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		group := args[0]
		if *to == "" {
			return usagef("group seek: --to is required")
		}
		spec, err := parseOffsetSpec(*to)
		if err != nil || spec.kind == "relative" {
			return usagef("group seek: --to %q: want beginning, end, OFFSET or @TIMESTAMP", *to)
		}
		return cf.runStep(cmd, func(ctx context.Context, c *conn) error {
			described, err := c.adm.DescribeGroups(ctx, group)
			if err != nil {
				return c.wrap("group seek", err)
			}
			d := described[group]
			missing := groupMissing(d.State, d.Err)
			switch {
			case d.Err != nil && !missing:
				return fmt.Errorf("group seek %s: %w", group, d.Err)
			case len(d.Members) > 0:
				return fmt.Errorf("group seek: group %q has %d member(s) (state %s); stop them first: offsets of a group with members cannot be changed", group, len(d.Members), d.State)
			case missing && *topic == "":
				return fmt.Errorf("group seek: group %q does not exist (give --topic to start it on a topic)", group)
			}
			topics := []string{*topic}
			if *topic == "" {
				committed, err := c.adm.FetchOffsets(ctx, group)
				if err == nil {
					err = committed.Error()
				}
				if err != nil {
					return c.wrap("group seek: committed offsets", err)
				}
				topics = committed.Offsets().TopicsSet().Topics()
				sort.Strings(topics)
				if len(topics) == 0 {
					return fmt.Errorf("group seek: group %q has no committed offsets (give --topic)", group)
				}
			}
			offsets := kadm.Offsets{}
			for _, t := range topics {
				td, err := topicDetail(c, cmd, "group seek", t)
				if err != nil {
					return err
				}
				k := &consumer{c: c, cmd: cmd, topic: t, spec: spec}
				starts, ends, err := k.bounds(cmd.Context())
				if err != nil {
					return err
				}
				at, err := k.startOffsets(cmd.Context(), td.Partitions.Numbers(), starts, ends)
				if err != nil {
					return err
				}
				for p, o := range at {
					offsets.AddOffset(t, p, o, -1)
				}
			}
			resps, err := c.adm.CommitOffsets(ctx, group, offsets)
			if err != nil {
				return c.wrap("group seek", err)
			}
			if err := resps.Error(); err != nil {
				return fmt.Errorf("group seek %s: %w", group, err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tOFFSET")
			for _, o := range offsets.Sorted() {
				fmt.Fprintf(tw, "%s\t%d\t%d\n", o.Topic, o.Partition, o.At)
			}
			return tw.Flush()
		})
	}
	return cmd
}
