package main

// sluice user: SCRAM users (DescribeUserScramCredentials and
// AlterUserScramCredentials; works against Sluice and Kafka).
//
//	sluice user create NAME --password PW [--mechanism SCRAM-SHA-512]...
//	sluice user delete NAME
//	sluice user list
//
// On user create, --password is the new user's password; the connecting
// user's comes from SLUICE_PASSWORD.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sluice/clientauth"
)

// adminConn is the connection flags of the user and acl commands.
type adminConn struct {
	brokers string
	sec     clientauth.Config
}

func (a *adminConn) add(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVarP(&a.brokers, "brokers", "b", envOr("SLUICE_BROKERS", "127.0.0.1:9092"), "comma-separated seed brokers (env SLUICE_BROKERS)")
	a.sec.AddFlags(f)
}

func (a *adminConn) client() (*kadm.Client, func(), error) {
	opts, err := a.sec.Opts()
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(a.brokers, ",")...), kgo.RetryTimeout(15 * time.Second)}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

func newUserCmd() *cobra.Command {
	var conn adminConn
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Create, delete and list SCRAM users",
		Args:  cobra.NoArgs,
		// Errors are printed once by main, without the usage.
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	conn.add(cmd)
	var password string
	var mechs []string
	var iterations int32
	create := &cobra.Command{
		Use:     "create NAME",
		Short:   "Create a user or change its password (SCRAM-SHA-256 and SCRAM-SHA-512)",
		Example: "  SLUICE_NEW_PASSWORD=secret sluice user create alice\n  sluice user create alice --password secret",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if password == "" {
				password = os.Getenv("SLUICE_NEW_PASSWORD")
			}
			if password == "" {
				return errors.New("user create: give --password (or SLUICE_NEW_PASSWORD)")
			}
			adm, done, err := conn.client()
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := signalContext()
			defer cancel()
			if err := clientauth.CreateUser(ctx, adm, args[0], password, iterations, mechs...); err != nil {
				return fmt.Errorf("user create %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created user %s\n", args[0])
			return nil
		},
	}
	create.Flags().StringVar(&password, "password", "", "the new user's password (env SLUICE_NEW_PASSWORD); the connecting user's password then comes from SLUICE_PASSWORD")
	create.Flags().StringSliceVar(&mechs, "mechanism", nil, "SCRAM-SHA-256 and/or SCRAM-SHA-512 (default both)")
	create.Flags().Int32Var(&iterations, "iterations", 8192, "SCRAM iterations (4096-16384)")
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a user's credentials",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, done, err := conn.client()
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := signalContext()
			defer cancel()
			if err := clientauth.DeleteUser(ctx, adm, args[0]); err != nil {
				return fmt.Errorf("user delete %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted user %s\n", args[0])
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List users and their mechanisms",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, done, err := conn.client()
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := signalContext()
			defer cancel()
			users, err := adm.DescribeUserSCRAMs(ctx)
			if err != nil {
				return fmt.Errorf("user list: %w", err)
			}
			return printUsers(cmd.OutOrStdout(), users)
		},
	}
	cmd.AddCommand(create, del, list)
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
