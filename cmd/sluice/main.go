// Command sluice runs a Sluice broker (a durable, Kafka-wire-compatible
// streaming log in one binary) and talks to Sluice, Kafka or Redpanda
// brokers from the command line.
//
// The root command and the list of subcommands are in this file. Each
// subcommand lives in its own file as a func new<Name>Cmd() *cobra.Command;
// client commands register the shared connection flags with
// addClientFlags (clientflags.go). Exit codes: 0 success, 1 error, 2 bad
// usage (unknown command or flag, wrong arguments, bad flag value).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// subcommands lists every top-level command; add new ones here.
func subcommands() []*cobra.Command {
	return []*cobra.Command{
		newServeCmd(),
		newTopicCmd(),
		newProduceCmd(),
		newConsumeCmd(),
		newGroupCmd(),
		newVersionCmd(),
		newBenchCmd(),
		newMirrorCmd(),
		newRepairCmd(),
		newUserCmd(),
		newACLCmd(),
		newSchemaCmd(),
		newTxnCmd(),
		newHealthCmd(),
		newTelemetryCmd(),
		newQuotaCmd(),
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "A durable, Kafka-wire-compatible streaming log in one binary",
		Long: `Sluice is a durable, Kafka-wire-compatible streaming log in one binary.

"sluice serve" runs a broker. The client commands (topic, produce,
consume, group, user, acl, bench) work against Sluice, Kafka or Redpanda:
they take -b/--brokers (env SLUICE_BROKERS, default 127.0.0.1:9092) and
--timeout, and connect over TLS and SASL with --tls-ca, --tls-cert and
--tls-key, --sasl-mechanism, --user and --password (env SLUICE_TLS_CA,
SLUICE_USER, SLUICE_PASSWORD). "sluice mirror" copies between two
clusters (--from, --to); "sluice repair" checks a stopped broker's data
directory.`,
		Args:          cobra.ArbitraryArgs,
		RunE:          runGroup,
		SilenceErrors: true,
		SilenceUsage:  true,

		SuggestionsMinimumDistance: 2,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(subcommands()...)
	return root
}

// runGroup is the RunE of commands that only hold subcommands: without
// arguments it prints the help, and an unknown subcommand is a usage error.
func runGroup(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		cmd.SetOut(cmd.ErrOrStderr())
		cmd.Help()
		return usageError{errors.New(strings.TrimPrefix(cmdName(cmd)+": missing subcommand", ": "))}
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError{errors.New(msg)}
}

// usageError marks a mistake on the command line: exit code 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exactArgs and rangeArgs are cobra argument checks that fail with usage errors.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return rangeArgs(n, n, what)
}

func rangeArgs(lo, hi int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= lo && (hi < 0 || len(args) <= hi) {
			return nil
		}
		return usagef("%s: want %s, got %d argument(s) %q", cmdName(cmd), what, len(args), args)
	}
}

// cmdName is the command's path without the root's name ("topic list"),
// as error messages name it after the "sluice: " that run prints.
func cmdName(cmd *cobra.Command) string {
	return strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()), " ")
}

// run executes the command line args with the given streams and returns
// the exit code; commands stop when ctx is done.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetContext(ctx)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "sluice:", err)
	var ue usageError
	if errors.As(err, &ue) {
		if cmd != nil {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return 2
	}
	if strings.HasPrefix(err.Error(), "unknown command ") || strings.HasPrefix(err.Error(), "unknown flag") {
		return 2 // cobra's own command-line errors
	}
	return 1
}

func main() {
	// SIGINT and SIGTERM end client commands and start serve's graceful
	// shutdown; serve then restores the default handling so that a
	// second signal kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
