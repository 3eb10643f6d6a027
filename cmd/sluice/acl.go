package main

// sluice acl: Kafka ACLs with rpk's flags (CreateAcls, DescribeAcls,
// DeleteAcls; works against Sluice and Kafka).
//
//	sluice acl create --allow-principal User:alice --operation read --topic orders --group billing
//	sluice acl list [filters]
//	sluice acl delete [filters]

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"sluice/clientauth"
)

func (s *aclFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringSliceVar(&s.AllowPrincipals, "allow-principal", nil, "principals to allow, User:NAME (repeatable)")
	f.StringSliceVar(&s.AllowHosts, "allow-host", nil, "hosts the allowed principals may connect from (default any)")
	f.StringSliceVar(&s.DenyPrincipals, "deny-principal", nil, "principals to deny, User:NAME (repeatable)")
	f.StringSliceVar(&s.DenyHosts, "deny-host", nil, "hosts the denied principals are denied from (default any)")
	f.StringSliceVar(&s.Operations, "operation", nil, "operations: read, write, create, delete, alter, describe, all, cluster_action, describe_configs, alter_configs, idempotent_write (any to filter)")
	f.StringSliceVar(&s.Topics, "topic", nil, "topic names (repeatable)")
	f.StringSliceVar(&s.Groups, "group", nil, "group names (repeatable)")
	f.StringSliceVar(&s.TxnIDs, "transactional-id", nil, "transactional ids (repeatable)")
	f.BoolVar(&s.Cluster, "cluster", false, "the cluster resource")
	f.StringVar(&s.PatternType, "resource-pattern-type", "", "literal or prefixed (default literal); any or match to filter list/delete (default any)")
}

type aclFlags struct{ clientauth.ACLSpec }

func newACLCmd() *cobra.Command {
	var conn adminConn
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Create, list and delete ACLs (rpk's flags)",
		Args:  cobra.NoArgs,
		// Errors are printed once by main, without the usage.
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	conn.add(cmd)
	run := func(create bool, spec *aclFlags, do func(*cobra.Command, *kadm.Client, *kadm.ACLBuilder) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			b, err := spec.Builder(create)
			if err != nil {
				return fmt.Errorf("acl %s: %w", cmd.Name(), err)
			}
			adm, done, err := conn.client()
			if err != nil {
				return err
			}
			defer done()
			return do(cmd, adm, b)
		}
	}
	var cs, ls, ds aclFlags
	create := &cobra.Command{
		Use:     "create",
		Short:   "Create ACLs: every principal x operation x resource given",
		Example: "  sluice acl create --allow-principal User:alice --operation read --topic orders --group billing\n  sluice acl create --deny-principal User:bob --operation all --topic tmp- --resource-pattern-type prefixed",
		Args:    cobra.NoArgs,
		RunE: run(true, &cs, func(cmd *cobra.Command, adm *kadm.Client, b *kadm.ACLBuilder) error {
			ctx, cancel := signalContext()
			defer cancel()
			res, err := adm.CreateACLs(ctx, b)
			if err != nil {
				return fmt.Errorf("acl create: %w", err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PRINCIPAL\tHOST\tRESOURCE-TYPE\tRESOURCE-NAME\tRESOURCE-PATTERN-TYPE\tOPERATION\tPERMISSION\tERROR")
			var failed error
			for _, r := range res {
				msg := ""
				if r.Err != nil {
					msg, failed = r.Err.Error(), r.Err
					if r.ErrMessage != "" {
						msg = r.ErrMessage
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Principal, r.Host, r.Type, r.Name, r.Pattern, r.Operation, r.Permission, msg)
			}
			tw.Flush()
			if failed != nil {
				return fmt.Errorf("acl create: %w", failed)
			}
			return nil
		}),
	}
	cs.add(create)
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"describe"},
		Short:   "List the ACLs matching the filters (all with none)",
		Args:    cobra.NoArgs,
		RunE: run(false, &ls, func(cmd *cobra.Command, adm *kadm.Client, b *kadm.ACLBuilder) error {
			ctx, cancel := signalContext()
			defer cancel()
			res, err := adm.DescribeACLs(ctx, b)
			if err != nil {
				return fmt.Errorf("acl list: %w", err)
			}
			return printACLs(cmd.OutOrStdout(), res)
		}),
	}
	ls.add(list)
	del := &cobra.Command{
		Use:   "delete",
		Short: "Delete the ACLs matching the filters",
		Args:  cobra.NoArgs,
		RunE: run(false, &ds, func(cmd *cobra.Command, adm *kadm.Client, b *kadm.ACLBuilder) error {
			ctx, cancel := signalContext()
			defer cancel()
			res, err := adm.DeleteACLs(ctx, b)
			if err != nil {
				return fmt.Errorf("acl delete: %w", err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PRINCIPAL\tHOST\tRESOURCE-TYPE\tRESOURCE-NAME\tRESOURCE-PATTERN-TYPE\tOPERATION\tPERMISSION")
			for _, r := range res {
				if r.Err != nil {
					tw.Flush()
					return fmt.Errorf("acl delete: %w", r.Err)
				}
				for _, d := range r.Deleted {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission)
				}
			}
			return tw.Flush()
		}),
	}
	ds.add(del)
	cmd.AddCommand(create, list, del)
	return cmd
}

func printACLs(out io.Writer, res kadm.DescribeACLsResults) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tHOST\tRESOURCE-TYPE\tRESOURCE-NAME\tRESOURCE-PATTERN-TYPE\tOPERATION\tPERMISSION")
	seen := map[kadm.DescribedACL]bool{}
	for _, r := range res {
		if r.Err != nil {
			tw.Flush()
			return fmt.Errorf("acl list: %w", r.Err)
		}
		for _, d := range r.Described {
			if seen[d] {
				continue
			}
			seen[d] = true
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission)
		}
	}
	return tw.Flush()
}
