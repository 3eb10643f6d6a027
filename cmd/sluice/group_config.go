package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newGroupConfigCmd is `sluice group config`: a group's configs (the
// GROUP config resource of Kafka 4.x), changed with IncrementalAlterConfigs
// and shown with DescribeConfigs.
func newGroupConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config GROUP [--set key=value]... [--delete key]...",
		Short: "Show a group's configs, or set and delete them (consumer.session.timeout.ms, share.auto.offset.reset, ...)",
		Example: `  sluice group config dashboards
  sluice group config dashboards --set consumer.heartbeat.interval.ms=8000
  sluice group config dashboards --delete consumer.heartbeat.interval.ms
  sluice group config workers --set share.auto.offset.reset=earliest`,
		Args: exactArgs(1, "one group id"),
	}
	cf := addClientFlags(cmd)
	sets := cmd.Flags().StringArrayP("set", "s", nil, "config key=value to set (repeatable)")
	dels := cmd.Flags().StringArrayP("delete", "d", nil, "config key to delete, back to the broker's value (repeatable)")
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, args []string, c *conn) error {
		group := args[0]
		kvs, err := parseKVs("--set", *sets)
		if err != nil {
			return err
		}
		if len(kvs)+len(*dels) > 0 {
			if err := alterGroupConfigs(ctx, c, group, kvs, *dels); err != nil {
				return err
			}
		}
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: group}}
		resp, err := req.RequestWith(ctx, c.cl)
		if err != nil {
			return c.wrap("group config", err)
		}
		if len(resp.Resources) != 1 {
			return fmt.Errorf("group config %s: the broker answered %d resources", group, len(resp.Resources))
		}
		r := resp.Resources[0]
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("group config %s: %w", group, fromBroker(err, deref(r.ErrorMessage)))
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tVALUE\tSOURCE")
		for _, e := range r.Configs {
			v := ""
			if e.Value != nil {
				v = *e.Value
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, v, e.Source)
		}
		return tw.Flush()
	})
	return cmd
}

func alterGroupConfigs(ctx context.Context, c *conn, group string, kvs map[string]*string, dels []string) error {
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	keys := make([]string, 0, len(kvs))
	for k := range kvs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		res.Configs = append(res.Configs, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: k, Op: kmsg.IncrementalAlterConfigOpSet, Value: kvs[k]})
	}
	for _, k := range dels {
		res.Configs = append(res.Configs, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: k, Op: kmsg.IncrementalAlterConfigOpDelete})
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{res}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return c.wrap("group config", err)
	}
	var errs []error
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			errs = append(errs, fmt.Errorf("group config %s: %w", r.ResourceName, fromBroker(err, deref(r.ErrorMessage))))
		}
	}
	return errors.Join(errs...)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
