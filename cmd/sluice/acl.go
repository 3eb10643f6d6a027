package main

// sluice acl: Kafka ACLs with rpk's flags (CreateAcls, DescribeAcls,
// DeleteAcls; works against Sluice and Kafka).
//
//	sluice acl create --allow-principal User:alice --operation read --topic orders --group billing
//	sluice acl list [filters]
//	sluice acl delete [filters]

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicedb/sluice/clientauth"
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
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Create, list and delete ACLs (rpk's flags)",
		Args:  cobra.ArbitraryArgs,
		RunE:  runGroup,
	}
	cmd.AddCommand(
		newACLSubCmd(&cobra.Command{
			Use:     "create",
			Short:   "Create ACLs: every principal x operation x resource given",
			Example: "  sluice acl create --allow-principal User:alice --operation read --topic orders --group billing\n  sluice acl create --deny-principal User:bob --operation all --topic tmp- --resource-pattern-type prefixed",
		}, true, aclCreate),
		newACLSubCmd(&cobra.Command{
			Use:     "list",
			Aliases: []string{"describe"},
			Short:   "List the ACLs matching the filters (all with none)",
		}, false, aclList),
		newACLSubCmd(&cobra.Command{
			Use:   "delete",
			Short: "Delete the ACLs matching the filters",
		}, false, aclDelete),
	)
	return cmd
}

// newACLSubCmd fills cmd with the connection and ACL flags and a RunE
// that builds the request and runs do.
func newACLSubCmd(cmd *cobra.Command, create bool, do func(ctx context.Context, out io.Writer, c *conn, b *kadm.ACLBuilder) error) *cobra.Command {
	var spec aclFlags
	cmd.Args = exactArgs(0, "no arguments (the ACL is given by flags)")
	cf := addClientFlags(cmd)
	spec.add(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		b, err := spec.Builder(create)
		if err != nil {
			return usagef("acl %s: %w", cmd.Name(), err)
		}
		return cf.runStep(cmd, func(ctx context.Context, conn *conn) error {
			return conn.wrap("acl "+cmd.Name(), do(ctx, cmd.OutOrStdout(), conn, b))
		})
	}
	return cmd
}

func aclCreate(ctx context.Context, out io.Writer, c *conn, b *kadm.ACLBuilder) error {
	res, err := c.adm.CreateACLs(ctx, b)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tHOST\tRESOURCE-TYPE\tRESOURCE-NAME\tRESOURCE-PATTERN-TYPE\tOPERATION\tPERMISSION\tERROR")
	var failed error
	for _, r := range res {
		msg := ""
		if r.Err != nil {
			failed = fromBroker(r.Err, r.ErrMessage)
			msg = failed.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Principal, r.Host, r.Type, r.Name, r.Pattern, r.Operation, r.Permission, msg)
	}
	tw.Flush()
	return failed
}

func aclList(ctx context.Context, out io.Writer, c *conn, b *kadm.ACLBuilder) error {
	res, err := c.adm.DescribeACLs(ctx, b)
	if err != nil {
		return err
	}
	return printACLs(out, res)
}

func aclDelete(ctx context.Context, out io.Writer, c *conn, b *kadm.ACLBuilder) error {
	res, err := c.adm.DeleteACLs(ctx, b)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "PRINCIPAL\tHOST\tRESOURCE-TYPE\tRESOURCE-NAME\tRESOURCE-PATTERN-TYPE\tOPERATION\tPERMISSION")
	for _, r := range res {
		if r.Err != nil {
			return fromBroker(r.Err, r.ErrMessage)
		}
		for _, d := range r.Deleted {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission)
		}
	}
	return nil
}

func printACLs(out io.Writer, res kadm.DescribeACLsResults) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tHOST\tRESOURCE-TYPE\tRESOURCE-NAME\tRESOURCE-PATTERN-TYPE\tOPERATION\tPERMISSION")
	seen := map[kadm.DescribedACL]bool{}
	for _, r := range res {
		if r.Err != nil {
			tw.Flush()
			return fromBroker(r.Err, r.ErrMessage)
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
