package main

// sluice user: SCRAM users (DescribeUserScramCredentials and
// AlterUserScramCredentials; works against Sluice and Kafka). Logic in
// package clientauth.
//
//	sluice user create NAME --new-password PW [--mechanism SCRAM-SHA-512]...
//	sluice user delete NAME
//	sluice user list
//
// On user create, --new-password is the new user's password; --user and
// --password (or SLUICE_PASSWORD) log in the user running the command, as
// on every client command.

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicedb/sluice/clientauth"
)

func newUserCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Create, delete and list SCRAM users",
		Args:  cobra.ArbitraryArgs,
		RunE:  runGroup,
	}
	cmd.AddCommand(newUserCreateCmd(), newUserDeleteCmd(), newUserListCmd())
	return cmd
}

func newUserCreateCmd() *cobra.Command {
	var password string
	var mechs []string
	var iterations int32
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a user or change its password (SCRAM-SHA-256 and SCRAM-SHA-512)",
		Long: `Create a user or change its password. --new-password is the new
user's password (or SLUICE_NEW_PASSWORD); the user running the command
logs in with --user and --password (or SLUICE_USER, SLUICE_PASSWORD), as
on every client command.`,
		Example: "  sluice user create alice --new-password secret --user admin --password admin-secret\n  SLUICE_NEW_PASSWORD=secret sluice user create alice --mechanism SCRAM-SHA-512",
		Args:    exactArgs(1, "a user name"),
	}
	cf := addClientFlags(cmd)
	cmd.Flags().StringVar(&password, "new-password", "", "the new user's password (env SLUICE_NEW_PASSWORD)")
	cmd.Flags().StringSliceVar(&mechs, "mechanism", nil, "SCRAM-SHA-256 and/or SCRAM-SHA-512 (default both)")
	cmd.Flags().Int32Var(&iterations, "iterations", 8192, "SCRAM iterations (4096-16384)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if password == "" {
			password = os.Getenv("SLUICE_NEW_PASSWORD")
		}
		if password == "" {
			return usagef("user create: give the new user's password with --new-password (or SLUICE_NEW_PASSWORD); --password is the login of the user running the command")
		}
		return cf.runStep(cmd, func(ctx context.Context, conn *conn) error {
			if err := clientauth.CreateUser(ctx, conn.adm, args[0], password, iterations, mechs...); err != nil {
				return conn.wrap("user create "+args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created user %s\n", args[0])
			return nil
		})
	}
	return cmd
}

func newUserDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a user's credentials",
		Args:  exactArgs(1, "a user name"),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, args []string, conn *conn) error {
		if err := clientauth.DeleteUser(ctx, conn.adm, args[0]); err != nil {
			return conn.wrap("user delete "+args[0], err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "deleted user %s\n", args[0])
		return nil
	})
	return cmd
}

func newUserListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List users and their mechanisms",
		Args:  exactArgs(0, "no arguments"),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = cf.stepRunE(func(ctx context.Context, cmd *cobra.Command, _ []string, conn *conn) error {
		users, err := conn.adm.DescribeUserSCRAMs(ctx)
		if err != nil {
			return conn.wrap("user list", err)
		}
		return printUsers(cmd.OutOrStdout(), users)
	})
	return cmd
}

func printUsers(out io.Writer, users kadm.DescribedUserSCRAMs) error {
	names := make([]string, 0, len(users))
	for n := range users {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tMECHANISMS")
	for _, n := range names {
		var ms []string
		for _, ci := range users[n].CredInfos {
			ms = append(ms, fmt.Sprintf("%s (%d iterations)", ci.Mechanism, ci.Iterations))
		}
		fmt.Fprintf(tw, "%s\t%s\n", n, strings.Join(ms, ", "))
	}
	return tw.Flush()
}
