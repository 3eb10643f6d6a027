package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The txn commands follow Kafka's kafka-transactions.sh (KIP-664): list
// the transactional ids, describe the producers of partitions, find the
// hanging transactions (open on a partition with no live coordinator
// state) and abort one through WriteTxnMarkers.

func newTxnCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "List transactions, describe producers, find and abort hanging transactions",
		Args:  cobra.ArbitraryArgs,
		RunE:  runGroup,
	}
	cmd.AddCommand(newTxnListCmd(), newTxnDescribeProducersCmd(), newTxnFindHangingCmd(), newTxnAbortCmd())
	return cmd
}

func newTxnListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List transactional ids with their producer id and state",
		Args:    exactArgs(0, "no arguments"),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, _ []string, c *conn) error {
		txns, err := c.adm.ListTransactions(ctx, nil, nil)
		if err != nil {
			return c.wrap("txn list", err)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TRANSACTIONAL-ID\tPRODUCER-ID\tSTATE")
		for _, t := range txns.Sorted() {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", t.TxnID, t.ProducerID, t.State)
		}
		return tw.Flush()
	})
	return cmd
}

// txnPartitionFlags are --topic and --partition: the partitions a txn
// command looks at.
type txnPartitionFlags struct {
	topic     string
	partition int32
}

func addTxnPartitionFlags(cmd *cobra.Command, required bool) *txnPartitionFlags {
	f := &txnPartitionFlags{}
	what := "the topic (default: every topic)"
	if required {
		what = "the topic (required)"
	}
	cmd.Flags().StringVarP(&f.topic, "topic", "t", "", what)
	cmd.Flags().Int32VarP(&f.partition, "partition", "p", -1, "the partition (default: every partition of the topic)")
	return f
}

// set resolves the flags to the partitions to describe, through Metadata.
func (f *txnPartitionFlags) set(ctx context.Context, c *conn, what string) (kadm.TopicsSet, error) {
	if f.topic == "" && f.partition >= 0 {
		return nil, usagef("%s: --partition needs --topic", what)
	}
	var topics []string
	if f.topic != "" {
		topics = append(topics, f.topic)
	}
	md, err := c.adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, c.wrap(what, err)
	}
	s := kadm.TopicsSet{}
	for _, t := range md.Sorted() {
		if t.Err != nil {
			return nil, fmt.Errorf("%s: topic %q: %w", what, t.Topic, t.Err)
		}
		if t.IsInternal {
			continue
		}
		for _, p := range t.Partitions.Sorted() {
			if f.partition < 0 || p.Partition == f.partition {
				s.Add(t.Topic, p.Partition)
			}
		}
	}
	if f.partition >= 0 && len(s) == 0 {
		return nil, fmt.Errorf("%s: topic %q has no partition %d", what, f.topic, f.partition)
	}
	return s, nil
}

// describeProducers describes the producers of s, failing on a
// partition's error.
func describeProducers(ctx context.Context, c *conn, s kadm.TopicsSet, what string) ([]kadm.DescribedProducer, error) {
	if len(s) == 0 {
		return nil, nil
	}
	ds, err := c.adm.DescribeProducers(ctx, s)
	if err != nil {
		return nil, c.wrap(what, err)
	}
	var errs []error
	for _, p := range ds.SortedPartitions() {
		if p.Err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%d: %w", what, p.Topic, p.Partition, fromBroker(p.Err, p.ErrMessage)))
		}
	}
	return ds.SortedProducers(), errors.Join(errs...)
}

// formatMs formats a Unix millisecond time, "-" when unknown.
func formatMs(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func newTxnDescribeProducersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe-producers --topic TOPIC [--partition N]",
		Short: "Show the producers with state on partitions and their open transactions",
		Long: `Show, for each partition of TOPIC (or only --partition), the idempotent and
transactional producers with state there: producer id, epoch, last
sequence, the first offset of its open transaction (if any) and its
last timestamp: the max timestamp of its last batch or transaction
marker on the partition, as Kafka reports it.`,
		Example: "  sluice txn describe-producers --topic orders --partition 0",
		Args:    exactArgs(0, "no arguments (name the topic with --topic)"),
	}
	cf := addClientFlags(cmd)
	pf := addTxnPartitionFlags(cmd, true)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if pf.topic == "" {
			return usagef("txn describe-producers: --topic is required")
		}
		return cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, _ []string, c *conn) error {
			s, err := pf.set(ctx, c, "txn describe-producers")
			if err != nil {
				return err
			}
			ps, err := describeProducers(ctx, c, s, "txn describe-producers")
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tPRODUCER-ID\tEPOCH\tLAST-SEQUENCE\tTXN-START-OFFSET\tLAST-TIMESTAMP")
			for _, p := range ps {
				start := "-"
				if p.CurrentTxnStartOffset >= 0 {
					start = strconv.FormatInt(p.CurrentTxnStartOffset, 10)
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", p.Topic, p.Partition, p.ProducerID, p.ProducerEpoch, p.LastSequence, start, formatMs(p.LastTimestamp))
			}
			return tw.Flush()
		})(cmd, args)
	}
	return cmd
}

// hangingTxn is a transaction found open on a partition with no live
// coordinator state.
type hangingTxn struct {
	kadm.DescribedProducer
	idleFor time.Duration // since the producer's last write there; -1: unknown
}

// findHanging lists the transactions open on the partitions of s whose
// producer wrote nothing there for at least maxTimeout (its last
// timestamp; an unknown one counts as old) and that no live transaction
// of their producer id on the coordinator (Ongoing, PrepareCommit,
// PrepareAbort) includes: nothing will end them. This is Kafka's
// kafka-transactions.sh find-hanging: DescribeProducers for the open
// transactions and their age, ListTransactions and DescribeTransactions
// for what the coordinator still holds.
func findHanging(ctx context.Context, c *conn, s kadm.TopicsSet, maxTimeout time.Duration, now time.Time) ([]hangingTxn, error) {
	const what = "txn find-hanging"
	ps, err := describeProducers(ctx, c, s, what)
	if err != nil {
		return nil, err
	}
	txns, err := c.adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		return nil, c.wrap(what, err)
	}
	var liveIDs []string
	for _, t := range txns {
		switch t.State {
		case "Ongoing", "PrepareCommit", "PrepareAbort":
			liveIDs = append(liveIDs, t.TxnID)
		}
	}
	// The partitions each producer id's live transaction still expects
	// a marker on.
	live := map[int64]kadm.TopicsSet{}
	if len(liveIDs) > 0 {
		ds, err := c.adm.DescribeTransactions(ctx, liveIDs...)
		if err != nil {
			return nil, c.wrap(what, err)
		}
		for _, d := range ds {
			if d.Err == nil {
				live[d.ProducerID] = d.Topics
			}
		}
	}
	var out []hangingTxn
	for _, p := range ps {
		if p.CurrentTxnStartOffset < 0 {
			continue
		}
		if _, ok := live[p.ProducerID][p.Topic][p.Partition]; ok {
			continue
		}
		idle := time.Duration(-1)
		if p.LastTimestamp >= 0 {
			idle = now.Sub(time.UnixMilli(p.LastTimestamp))
			if idle < maxTimeout {
				continue
			}
		}
		out = append(out, hangingTxn{DescribedProducer: p, idleFor: idle})
	}
	return out, nil
}

func newTxnFindHangingCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "find-hanging [--topic TOPIC [--partition N]]",
		Short: "Find transactions open on a partition that no transaction coordinator state will end",
		Long: `Find hanging transactions: open on a partition (its last stable offset
stays before them, so read_committed consumers stop there), their
producer silent there (by its last timestamp) for at least
--max-transaction-timeout, and no live transaction of their producer id
on the transaction coordinator including that partition, as Kafka's
kafka-transactions.sh find-hanging decides. Without --topic every topic
is searched. End one with sluice txn abort. The broker itself aborts
them once transaction.max.timeout.ms has passed.`,
		Example: "  sluice txn find-hanging\n  sluice txn find-hanging --topic orders --max-transaction-timeout 0s",
		Args:    exactArgs(0, "no arguments"),
	}
	cf := addClientFlags(cmd)
	pf := addTxnPartitionFlags(cmd, false)
	maxTimeout := cmd.Flags().Duration("max-transaction-timeout", 15*time.Minute,
		"report open transactions whose producer wrote nothing to the partition for at least this long (the brokers' transaction.max.timeout.ms)")
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, _ []string, c *conn) error {
		if *maxTimeout < 0 {
			return usagef("txn find-hanging: --max-transaction-timeout %v is negative", *maxTimeout)
		}
		s, err := pf.set(ctx, c, "txn find-hanging")
		if err != nil {
			return err
		}
		hs, err := findHanging(ctx, c, s, *maxTimeout, time.Now())
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tPRODUCER-ID\tEPOCH\tSTART-OFFSET\tIDLE-FOR")
		for _, h := range hs {
			idle := "unknown"
			if h.idleFor >= 0 {
				idle = h.idleFor.Round(time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", h.Topic, h.Partition, h.ProducerID, h.ProducerEpoch, h.CurrentTxnStartOffset, idle)
		}
		return tw.Flush()
	})
	return cmd
}

func newTxnAbortCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "abort --topic TOPIC --partition N (--start-offset OFFSET | --producer-id ID --producer-epoch E)",
		Short: "Abort a hanging transaction on a partition (WriteTxnMarkers)",
		Long: `Abort a transaction open on one partition by writing an ABORT marker there
(WriteTxnMarkers, CLUSTER_ACTION on the cluster). Name the transaction by
its --start-offset, as sluice txn find-hanging prints it (its producer id
and epoch are then looked up with DescribeProducers), or by
--producer-id and --producer-epoch. The transaction coordinator's state
is not changed: abort only transactions it has none for.`,
		Example: "  sluice txn abort --topic orders --partition 0 --start-offset 42",
		Args:    exactArgs(0, "no arguments"),
	}
	cf := addClientFlags(cmd)
	topic := cmd.Flags().StringP("topic", "t", "", "the topic (required)")
	part := cmd.Flags().Int32P("partition", "p", -1, "the partition (required)")
	start := cmd.Flags().Int64("start-offset", -1, "the first offset of the transaction to abort")
	pid := cmd.Flags().Int64("producer-id", -1, "the producer id of the transaction to abort")
	epoch := cmd.Flags().Int16("producer-epoch", -1, "the producer epoch of the transaction to abort")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		switch {
		case *topic == "" || *part < 0:
			return usagef("txn abort: --topic and --partition are required")
		case (*start >= 0) == (*pid >= 0):
			return usagef("txn abort: give either --start-offset or --producer-id with --producer-epoch")
		case *pid >= 0 && *epoch < 0:
			return usagef("txn abort: --producer-id needs --producer-epoch")
		}
		return cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, _ []string, c *conn) error {
			id, ep := *pid, *epoch
			if *start >= 0 {
				s := kadm.TopicsSet{}
				s.Add(*topic, *part)
				ps, err := describeProducers(ctx, c, s, "txn abort")
				if err != nil {
					return err
				}
				found := false
				for _, p := range ps {
					if p.CurrentTxnStartOffset == *start {
						id, ep, found = p.ProducerID, p.ProducerEpoch, true
					}
				}
				if !found {
					return fmt.Errorf("txn abort: no transaction starting at offset %d is open on %s/%d (see sluice txn describe-producers)", *start, *topic, *part)
				}
			}
			s := kadm.TopicsSet{}
			s.Add(*topic, *part)
			resps, err := c.adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: id, ProducerEpoch: ep, Commit: false, CoordinatorEpoch: -1, Topics: s})
			if err != nil {
				return c.wrap("txn abort", err)
			}
			var errs []error
			got := false
			for _, r := range resps.SortedPartitions() {
				got = true
				if r.Err != nil {
					if errors.Is(r.Err, kerr.ClusterAuthorizationFailed) {
						errs = append(errs, fmt.Errorf("txn abort %s/%d: %w (CLUSTER_ACTION on the cluster is needed)", r.Topic, r.Partition, r.Err))
						continue
					}
					errs = append(errs, fmt.Errorf("txn abort %s/%d: %w", r.Topic, r.Partition, r.Err))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "aborted the transaction of producer %d (epoch %d) on %s/%d\n", id, ep, r.Topic, r.Partition)
			}
			if !got {
				errs = append(errs, fmt.Errorf("txn abort: no answer for %s/%d", *topic, *part))
			}
			return errors.Join(errs...)
		})(cmd, args)
	}
	return cmd
}
