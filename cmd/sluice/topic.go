package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func newTopicCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "List, describe, create, delete and alter topics",
		Args:  cobra.ArbitraryArgs,
		RunE:  runGroup,
	}
	cmd.AddCommand(
		newTopicListCmd(),
		newTopicDescribeCmd(),
		newTopicCreateCmd(),
		newTopicDeleteCmd(),
		newTopicAddPartitionsCmd(),
		newTopicAlterConfigCmd(),
	)
	return cmd
}

func newTopicListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List topics with their partition counts",
		Args:    exactArgs(0, "no arguments"),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, _ []string, c *conn) error {
		topics, err := c.adm.ListTopics(ctx)
		if err != nil {
			return c.wrap("topic list", err)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tPARTITIONS\tREPLICAS")
		for _, t := range topics.Sorted() {
			if t.Err != nil {
				return fmt.Errorf("topic list: %s: %w", t.Topic, t.Err)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\n", t.Topic, len(t.Partitions), t.Partitions.NumReplicas())
		}
		return tw.Flush()
	})
	return cmd
}

// topicDetail returns the metadata of one topic, or an error naming it
// when it does not exist.
func topicDetail(c *conn, cmd *cobra.Command, what, topic string) (kadm.TopicDetail, error) {
	ctx, cancel := c.step(cmd.Context())
	defer cancel()
	topics, err := c.adm.ListTopics(ctx, topic)
	if err != nil {
		return kadm.TopicDetail{}, c.wrap(what, err)
	}
	t, ok := topics[topic]
	switch {
	case !ok, errors.Is(t.Err, kerr.UnknownTopicOrPartition):
		return kadm.TopicDetail{}, fmt.Errorf("%s: topic %q does not exist", what, topic)
	case t.Err != nil:
		return kadm.TopicDetail{}, fmt.Errorf("%s: topic %q: %w", what, topic, t.Err)
	}
	return t, nil
}

func newTopicDescribeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe TOPIC",
		Short: "Show a topic's partitions (leader, start and end offsets, size) and configs (value and source)",
		Args:  exactArgs(1, "one topic name"),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		name := args[0]
		what := "topic describe " + name
		c, err := cf.connect(cmd.Context())
		if err != nil {
			return err
		}
		defer c.Close()
		t, err := topicDetail(c, cmd, what, name)
		if err != nil {
			return err
		}
		ctx, cancel := c.step(cmd.Context())
		defer cancel()
		starts, err := c.adm.ListStartOffsets(ctx, name)
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			return c.wrap(what+": start offsets", err)
		}
		ends, err := c.adm.ListEndOffsets(ctx, name)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return c.wrap(what+": end offsets", err)
		}
		// Sizes come from DescribeLogDirs, which not every broker serves;
		// without it the SIZE column shows "-". The request names every
		// partition: an empty partition list asks about none.
		sizes := map[int32]int64{}
		parts := map[int32]struct{}{}
		for p := range t.Partitions {
			parts[p] = struct{}{}
		}
		if dirs, err := c.adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{name: parts}); err == nil {
			dirs.Each(func(d kadm.DescribedLogDir) {
				d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
					if p.Topic == name {
						sizes[p.Partition] += p.Size
					}
				})
			})
		}
		configs, err := c.adm.DescribeTopicConfigs(ctx, name)
		if err != nil {
			return c.wrap(what+": configs", err)
		}
		rc, err := configs.On(name, nil)
		if err == nil {
			err = fromBroker(rc.Err, rc.ErrMessage)
		}
		if err != nil {
			return fmt.Errorf("%s: configs: %w", what, err)
		}

		out := cmd.OutOrStdout()
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "NAME\t%s\n", t.Topic)
		fmt.Fprintf(tw, "PARTITIONS\t%d\n", len(t.Partitions))
		fmt.Fprintf(tw, "REPLICAS\t%d\n", t.Partitions.NumReplicas())
		tw.Flush()
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tLEADER\tSTART\tEND\tSIZE")
		for _, p := range t.Partitions.Sorted() {
			size := "-"
			if s, ok := sizes[p.Partition]; ok {
				size = fmt.Sprint(s)
			}
			start, _ := starts.Lookup(name, p.Partition)
			end, _ := ends.Lookup(name, p.Partition)
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\n", p.Partition, p.Leader, start.Offset, end.Offset, size)
		}
		tw.Flush()
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CONFIG\tVALUE\tSOURCE")
		sort.Slice(rc.Configs, func(i, j int) bool { return rc.Configs[i].Key < rc.Configs[j].Key })
		for _, kv := range rc.Configs {
			v := "-"
			if kv.Sensitive {
				v = "(sensitive)"
			} else if kv.Value != nil {
				v = *kv.Value
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", kv.Key, v, kv.Source)
		}
		return tw.Flush()
	}
	return cmd
}

// parseKVs turns k=v strings into a map; flag names the flag for errors.
func parseKVs(flag string, kvs []string) (map[string]*string, error) {
	m := make(map[string]*string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want key=value", flag, kv)
		}
		m[k] = &v
	}
	return m, nil
}

func newTopicCreateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create TOPIC...",
		Short: "Create topics",
		Example: `  sluice topic create orders -p 3 -c retention.ms=86400000
  sluice topic create a b c --partitions 6`,
		Args: rangeArgs(1, -1, "one or more topic names"),
	}
	cf := addClientFlags(cmd)
	partitions := cmd.Flags().Int32P("partitions", "p", -1, "number of partitions (-1: the broker's default)")
	replicas := cmd.Flags().Int16P("replicas", "r", -1, "replication factor (-1: the broker's default)")
	configs := cmd.Flags().StringArrayP("config", "c", nil, "topic config key=value (repeatable)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		conf, err := parseKVs("--config", *configs)
		if err != nil {
			return err
		}
		return cf.runStep(cmd, func(ctx context.Context, c *conn) error {
			resps, err := c.adm.CreateTopics(ctx, *partitions, *replicas, conf, args...)
			if err != nil {
				return c.wrap("topic create", err)
			}
			var errs []error
			for _, name := range args {
				r, ok := resps[name]
				if !ok {
					errs = append(errs, fmt.Errorf("topic create %s: no answer for this topic", name))
					continue
				}
				if r.Err != nil {
					errs = append(errs, fmt.Errorf("topic create %s: %w", name, fromBroker(r.Err, r.ErrMessage)))
					continue
				}
				unit := "partitions"
				if r.NumPartitions == 1 {
					unit = "partition"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "created %s (%d %s)\n", name, r.NumPartitions, unit)
			}
			return errors.Join(errs...)
		})
	}
	return cmd
}

// isTerminal reports whether r is a terminal, where a question can be asked.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newTopicDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete TOPIC...",
		Short: "Delete topics and their data (asks first on a terminal unless --yes)",
		Args:  rangeArgs(1, -1, "one or more topic names"),
	}
	cf := addClientFlags(cmd)
	yes := cmd.Flags().BoolP("yes", "y", false, "do not ask for confirmation")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := cf.connect(cmd.Context())
		if err != nil {
			return err
		}
		defer c.Close()
		if !*yes && isTerminal(cmd.InOrStdin()) {
			fmt.Fprintf(cmd.ErrOrStderr(), "Delete topic(s) %s and all their records on %s? [y/N] ", strings.Join(args, ", "), strings.Join(c.seeds, ","))
			answer, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
				return errors.New("topic delete: not confirmed; nothing deleted")
			}
		}
		ctx, cancel := c.step(cmd.Context())
		defer cancel()
		resps, err := c.adm.DeleteTopics(ctx, args...)
		if err != nil {
			return c.wrap("topic delete", err)
		}
		var errs []error
		for _, name := range args {
			r, ok := resps[name]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("topic delete %s: no answer for this topic", name))
			case r.Err != nil:
				errs = append(errs, fmt.Errorf("topic delete %s: %w", name, fromBroker(r.Err, r.ErrMessage)))
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", name)
			}
		}
		return errors.Join(errs...)
	}
	return cmd
}

func newTopicAddPartitionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "add-partitions TOPIC... --num N",
		Short: "Add partitions to topics",
		Args:  rangeArgs(1, -1, "one or more topic names"),
	}
	cf := addClientFlags(cmd)
	num := cmd.Flags().IntP("num", "n", 0, "number of partitions to add (required)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *num <= 0 {
			return usagef("topic add-partitions: --num %d: want a positive number of partitions to add", *num)
		}
		return cf.runStep(cmd, func(ctx context.Context, c *conn) error {
			resps, err := c.adm.CreatePartitions(ctx, *num, args...)
			if err != nil {
				return c.wrap("topic add-partitions", err)
			}
			var errs []error
			for _, name := range args {
				r, ok := resps[name]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("topic add-partitions %s: topic %q does not exist", name, name))
				case errors.Is(r.Err, kerr.UnknownTopicOrPartition) && r.ErrMessage == "":
					errs = append(errs, fmt.Errorf("topic add-partitions %s: topic %q does not exist", name, name))
				case r.Err != nil:
					errs = append(errs, fmt.Errorf("topic add-partitions %s: %w", name, fromBroker(r.Err, r.ErrMessage)))
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "added %d partition(s) to %s\n", *num, name)
				}
			}
			return errors.Join(errs...)
		})
	}
	return cmd
}

func newTopicAlterConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "alter-config TOPIC... [--set key=value]... [--delete key]...",
		Short: "Set or delete topic configs (IncrementalAlterConfigs)",
		Example: `  sluice topic alter-config orders --set retention.ms=3600000
  sluice topic alter-config orders --delete retention.ms`,
		Args: rangeArgs(1, -1, "one or more topic names"),
	}
	cf := addClientFlags(cmd)
	sets := cmd.Flags().StringArrayP("set", "s", nil, "config key=value to set (repeatable)")
	dels := cmd.Flags().StringArrayP("delete", "d", nil, "config key to delete, back to its default (repeatable)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		kvs, err := parseKVs("--set", *sets)
		if err != nil {
			return err
		}
		if len(kvs)+len(*dels) == 0 {
			return usagef("topic alter-config: nothing to do: give --set key=value or --delete key")
		}
		var alters []kadm.AlterConfig
		keys := make([]string, 0, len(kvs))
		for k := range kvs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kvs[k]})
		}
		for _, k := range *dels {
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
		return cf.runStep(cmd, func(ctx context.Context, c *conn) error {
			resps, err := c.adm.AlterTopicConfigs(ctx, alters, args...)
			if err != nil {
				return c.wrap("topic alter-config", err)
			}
			var errs []error
			for _, r := range resps {
				if r.Err != nil {
					errs = append(errs, fmt.Errorf("topic alter-config %s: %w", r.Name, fromBroker(r.Err, r.ErrMessage)))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "altered %s\n", r.Name)
			}
			return errors.Join(errs...)
		})
	}
	return cmd
}
