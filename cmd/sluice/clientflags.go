package main

// The connection flags every client command shares. A command adds them
// with addClientFlags and does its work in one step bounded by --timeout
// with clientFlags.stepRunE, or runStep after checks of its own:
//
//	func newFooCmd() *cobra.Command {
//		cmd := &cobra.Command{Use: "foo", ...}
//		cf := addClientFlags(cmd)
//		cmd.RunE = func(cmd *cobra.Command, args []string) error {
//			... // check the flags: usage errors before any connection
//			return cf.runStep(cmd, func(ctx context.Context, c *conn) error {
//				...
//			})
//		}
//	}
//
// Commands that do more than one step connect with clientFlags.connect
// and bound each step with conn.step.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/clientauth"
)

// defaultBrokers is the seed broker list when neither -b nor
// SLUICE_BROKERS is given: the address `sluice serve` listens on.
const defaultBrokers = "127.0.0.1:9092"

// clientFlags holds the connection settings of a client command.
type clientFlags struct {
	cmd     *cobra.Command
	brokers string
	timeout time.Duration

	// sec is TLS and SASL (--tls-ca, --tls-cert, --tls-key,
	// --sasl-mechanism, --user, --password; env SLUICE_TLS_CA,
	// SLUICE_USER, SLUICE_PASSWORD), turned into kgo options by kgoOpts.
	sec clientauth.Config
}

// addClientFlags registers -b/--brokers, --timeout and the TLS and SASL
// flags on cmd, except those named in skip.
func addClientFlags(cmd *cobra.Command, skip ...string) *clientFlags {
	cf := &clientFlags{cmd: cmd}
	fs := cmd.Flags()
	fs.StringVarP(&cf.brokers, "brokers", "b", defaultBrokers, "comma-separated seed brokers (env SLUICE_BROKERS)")
	fs.DurationVar(&cf.timeout, "timeout", 10*time.Second, "limit on each network step: connecting, each request, each delivery")
	cf.sec.AddFlags(fs, skip...)
	return cf
}

// seeds returns the seed brokers: the flag when given, else SLUICE_BROKERS,
// else the default.
func (cf *clientFlags) seeds() ([]string, error) {
	list := cf.brokers
	if !cf.cmd.Flags().Changed("brokers") {
		if v, ok := os.LookupEnv("SLUICE_BROKERS"); ok && v != "" {
			list = v
		}
	}
	var seeds []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil, usagef("--brokers: want at least one HOST:PORT")
	}
	return seeds, nil
}

// kgoOpts returns the client options for the connection flags, TLS and
// SASL included (loading a CA or key file may fail).
func (cf *clientFlags) kgoOpts(seeds []string) ([]kgo.Opt, error) {
	sec, err := cf.sec.Opts()
	if err != nil {
		return nil, usageError{err}
	}
	return append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.DialTimeout(cf.timeout),
		kgo.RetryTimeout(cf.timeout),
		kgo.RequestTimeoutOverhead(cf.timeout),
		kgo.ProduceRequestTimeout(cf.timeout),
		kgo.RecordDeliveryTimeout(max(cf.timeout, time.Second)), // kgo's minimum
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.ClientID("sluice-cli"),
	}, sec...), nil
}

// conn is a connected client: a kgo client and its admin view.
type conn struct {
	cl      *kgo.Client
	adm     *kadm.Client
	seeds   []string
	timeout time.Duration
}

// connect checks that a seed broker answers a TCP connection within
// --timeout (so a dead broker fails at once with "cannot reach ...")
// and returns a client with opts added.
func (cf *clientFlags) connect(ctx context.Context, opts ...kgo.Opt) (*conn, error) {
	if cf.timeout <= 0 {
		return nil, usagef("--timeout %v: want a positive duration", cf.timeout)
	}
	seeds, err := cf.seeds()
	if err != nil {
		return nil, err
	}
	if err := reachable(ctx, seeds, cf.timeout); err != nil {
		return nil, err
	}
	base, err := cf.kgoOpts(seeds)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(cf.timeout.Milliseconds()))
	return &conn{cl: cl, adm: adm, seeds: seeds, timeout: cf.timeout}, nil
}

// reachable returns nil when any seed accepts a TCP connection, else the
// first seed's failure as "cannot reach ADDR: REASON".
func reachable(ctx context.Context, seeds []string, timeout time.Duration) error {
	var first error
	for _, s := range seeds {
		d := net.Dialer{Timeout: timeout}
		c, err := d.DialContext(ctx, "tcp", s)
		if err == nil {
			c.Close()
			return nil
		}
		if first == nil {
			first = fmt.Errorf("cannot reach %s: %s", s, dialReason(err, timeout))
		}
	}
	return first
}

// dialReason says briefly why a dial failed.
func dialReason(err error, timeout time.Duration) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no answer within %v", timeout)
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// Close closes the client.
func (c *conn) Close() { c.cl.Close() }

// step returns a context for one network step, bounded by --timeout.
func (c *conn) step(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// wrap turns a request error into a message for the user: a timeout
// names the brokers and the limit, a dial failure says which broker.
func (c *conn) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	var ne *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: no answer from %s within %v (--timeout): %w", what, strings.Join(c.seeds, ","), c.timeout, err)
	case strings.Contains(err.Error(), "broker is too old"):
		return fmt.Errorf("%s: the broker does not support this request (%w)", what, err)
	case errors.As(err, &ne) && ne.Op == "dial":
		return fmt.Errorf("%s: %s", what, c.dialFailure(ne, err))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// dialFailure says which address a dial failed to reach (a failed name
// lookup has no net.Addr, only the name) and why. An address that is not
// a seed came from the cluster's metadata: the hint points at the
// broker's advertised address.
func (c *conn) dialFailure(ne *net.OpError, err error) string {
	addr := ""
	var de *net.DNSError
	switch {
	case ne.Addr != nil:
		addr = ne.Addr.String()
	case errors.As(err, &de):
		addr = de.Name
	}
	if addr == "" {
		return "cannot reach a broker: " + dialReason(err, c.timeout)
	}
	msg := "cannot reach " + addr + ": " + dialReason(err, c.timeout)
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	for _, s := range c.seeds {
		if s == addr || strings.HasPrefix(s, host+":") {
			return msg
		}
	}
	return msg + " (the seeds " + strings.Join(c.seeds, ",") + " answered and name this address for a broker: its --advertise, or --advertised-listeners, must be an address this machine can reach)"
}

// brokerError is a per-resource error from a broker: the Kafka error
// code's name, then the broker's own message (or the code's standard
// description when the broker sent none). It unwraps to the *kerr.Error.
type brokerError struct {
	err error
	msg string
}

func (e *brokerError) Error() string {
	var ke *kerr.Error
	if errors.As(e.err, &ke) {
		switch {
		case e.msg == "":
			return ke.Error()
		case strings.HasPrefix(e.msg, ke.Message+":"):
			return e.msg // the broker named the code already
		}
		return ke.Message + ": " + e.msg
	}
	if e.msg != "" {
		return e.err.Error() + ": " + e.msg
	}
	return e.err.Error()
}

func (e *brokerError) Unwrap() error { return e.err }

// fromBroker returns nil when err is nil, else a *brokerError.
func fromBroker(err error, msg string) error {
	if err == nil {
		return nil
	}
	return &brokerError{err: err, msg: msg}
}

// stepRunE makes the RunE of a command that does its work in one
// bounded step: it connects with the command's client flags, gives fn a
// context that ends after --timeout, and closes the client afterwards.
func (cf *clientFlags) stepRunE(fn func(ctx context.Context, cmd *cobra.Command, args []string, c *conn) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return cf.runStep(cmd, func(ctx context.Context, c *conn) error { return fn(ctx, cmd, args, c) })
	}
}

// runStep is stepRunE's work, for a RunE that checks its arguments and
// flags first: it connects with cmd's client flags, runs fn with a
// context that ends after --timeout, and closes the client afterwards.
func (cf *clientFlags) runStep(cmd *cobra.Command, fn func(ctx context.Context, c *conn) error) error {
	c, err := cf.connect(cmd.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := c.step(cmd.Context())
	defer cancel()
	return fn(ctx, c)
}
