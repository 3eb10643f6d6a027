package main

// sluice telemetry: client telemetry subscriptions (KIP-714
// CLIENT_METRICS config resources), as Kafka's kafka-client-metrics.sh.
//
//	sluice telemetry set producers --metrics org.apache.kafka.producer. --interval-ms 60000 --match client_software_name=kgo
//	sluice telemetry list
//	sluice telemetry delete producers

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newTelemetryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "telemetry",
		Short: "Set, list and delete client telemetry subscriptions (KIP-714)",
		Args:  cobra.ArbitraryArgs,
		RunE:  runGroup,
	}
	cmd.AddCommand(newClientMetricsSetCmd(), newClientMetricsListCmd(), newClientMetricsDeleteCmd())
	return cmd
}

func newClientMetricsSetCmd() *cobra.Command {
	var metrics, match string
	var interval int
	cmd := &cobra.Command{
		Use:     "set NAME",
		Short:   "Create or change a subscription: the metrics matching clients push, how often",
		Example: "  sluice telemetry set producers --metrics org.apache.kafka.producer. --interval-ms 60000 --match 'client_software_name=kgo'",
		Args:    exactArgs(1, "the subscription's name"),
	}
	cf := addClientFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&metrics, "metrics", "", "comma-separated metric name prefixes clients push, * for all")
	f.IntVar(&interval, "interval-ms", 0, "push interval in milliseconds, 100 to 3600000 (default 300000)")
	f.StringVar(&match, "match", "", "comma-separated key=regex rules a client must all match: client_instance_id, client_id, client_software_name, client_software_version, client_source_address, client_source_port (default every client)")
	var cfgs []kmsg.IncrementalAlterConfigsRequestResourceConfig
	cmd.PreRunE = func(*cobra.Command, []string) error {
		add := func(name, value string) {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = name, kmsg.StringPtr(value)
			cfgs = append(cfgs, c)
		}
		if f.Changed("metrics") {
			add("metrics", metrics)
		}
		if f.Changed("interval-ms") {
			add("interval.ms", strconv.Itoa(interval))
		}
		if f.Changed("match") {
			add("match", match)
		}
		if len(cfgs) == 0 {
			return usagef("telemetry set: give at least one of --metrics, --interval-ms, --match")
		}
		return nil
	}
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, args []string, c *conn) error {
		if err := alterClientMetrics(ctx, c, args[0], cfgs); err != nil {
			return c.wrap("telemetry set", err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "subscription %s set\n", args[0])
		return nil
	})
	return cmd
}

func newClientMetricsDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a subscription",
		Args:  exactArgs(1, "the subscription's name"),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, args []string, c *conn) error {
		var cfgs []kmsg.IncrementalAlterConfigsRequestResourceConfig
		for _, name := range []string{"metrics", "interval.ms", "match"} {
			dc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			dc.Name, dc.Op = name, kmsg.IncrementalAlterConfigOpDelete
			cfgs = append(cfgs, dc)
		}
		if err := alterClientMetrics(ctx, c, args[0], cfgs); err != nil {
			return c.wrap("telemetry delete", err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "subscription %s deleted\n", args[0])
		return nil
	})
	return cmd
}

func newClientMetricsListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"describe"},
		Short:   "List the subscriptions with their configs",
		Args:    exactArgs(0, "no arguments"),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, _ []string, c *conn) error {
		return c.wrap("telemetry list", listClientMetrics(ctx, cmd.OutOrStdout(), c))
	})
	return cmd
}

func alterClientMetrics(ctx context.Context, c *conn, name string, cfgs []kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeClientMetrics, name, cfgs
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return err
	}
	if len(resp.Resources) != 1 {
		return fmt.Errorf("the broker answered %d resources for one", len(resp.Resources))
	}
	r := resp.Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		return fromBroker(err, msg)
	}
	return nil
}

func listClientMetrics(ctx context.Context, out io.Writer, c *conn) error {
	lreq := kmsg.NewPtrListConfigResourcesRequest()
	lreq.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeClientMetrics)}
	lresp, err := lreq.RequestWith(ctx, c.cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(lresp.ErrorCode); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "NAME\tMETRICS\tINTERVAL-MS\tMATCH")
	if len(lresp.ConfigResources) == 0 {
		return nil
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	for _, r := range lresp.ConfigResources {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, r.Name
		dreq.Resources = append(dreq.Resources, rr)
	}
	dresp, err := dreq.RequestWith(ctx, c.cl)
	if err != nil {
		return err
	}
	for _, r := range dresp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("%s: %w", r.ResourceName, err)
		}
		v := map[string]string{}
		for _, c := range r.Configs {
			if c.Value != nil {
				v[c.Name] = *c.Value
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ResourceName, v["metrics"], v["interval.ms"], v["match"])
	}
	return nil
}
