package main

// sluice schema: the schema registry (Confluent's REST API, served by
// sluice serve --schema-registry or any Confluent-compatible registry),
// through franz-go's sr client.
//
//	sluice schema list [--deleted]
//	sluice schema get SUBJECT [--version N|latest] | --id N
//	sluice schema register SUBJECT --file F [--type AVRO|PROTOBUF|JSON] [--reference NAME=SUBJECT:VERSION]...
//	sluice schema delete SUBJECT [--version N] [--permanent]
//	sluice schema compatibility SUBJECT --file F [--type T] [--version N|latest|all]
//	sluice schema config [SUBJECT] [--set LEVEL] [--mode MODE]

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/sr"
)

// defaultRegistry is the registry URL when neither --registry nor
// SLUICE_SCHEMA_REGISTRY_URL is given: where sluice serve serves it.
const defaultRegistry = "http://127.0.0.1:8081"

func newSchemaCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "List, get, register and delete schemas in a schema registry; check compatibility; set levels",
		Long: `Talk to a schema registry with Confluent's REST API: the one sluice serve
runs (--schema-registry, default 127.0.0.1:8081) or any compatible one.
With SASL users on the broker, log in with --user and SLUICE_PASSWORD.`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	cmd.AddCommand(newSchemaListCmd(), newSchemaGetCmd(), newSchemaRegisterCmd(), newSchemaDeleteCmd(),
		newSchemaCompatibilityCmd(), newSchemaConfigCmd())
	return cmd
}

// registryFlags are the flags every schema command shares.
type registryFlags struct {
	cmd     *cobra.Command
	url     string
	user    string
	tlsCA   string
	timeout time.Duration
}

func addRegistryFlags(cmd *cobra.Command) *registryFlags {
	rf := &registryFlags{cmd: cmd}
	fs := cmd.Flags()
	fs.StringVar(&rf.url, "registry", defaultRegistry, "schema registry URL (env SLUICE_SCHEMA_REGISTRY_URL)")
	fs.StringVar(&rf.user, "user", "", "log in as this user with HTTP Basic, password from SLUICE_PASSWORD (env SLUICE_USER)")
	fs.StringVar(&rf.tlsCA, "tls-ca", "", "PEM CA that signs an https registry's certificate (env SLUICE_TLS_CA)")
	fs.DurationVar(&rf.timeout, "timeout", 10*time.Second, "limit on each request")
	return rf
}

func (rf *registryFlags) client() (*sr.Client, error) {
	url := rf.url
	if !rf.cmd.Flags().Changed("registry") {
		if v := os.Getenv("SLUICE_SCHEMA_REGISTRY_URL"); v != "" {
			url = v
		}
	}
	user := rf.user
	if user == "" {
		user = os.Getenv("SLUICE_USER")
	}
	ca := rf.tlsCA
	if ca == "" {
		ca = os.Getenv("SLUICE_TLS_CA")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, usagef("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--tls-ca %s: no PEM certificate", ca)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	opts := []sr.ClientOpt{sr.URLs(url), sr.HTTPClient(&http.Client{Timeout: rf.timeout, Transport: tr}), sr.UserAgent("sluice")}
	if user != "" {
		opts = append(opts, sr.BasicAuth(user, os.Getenv("SLUICE_PASSWORD")))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, usagef("--registry %s: %w", url, err)
	}
	return cl, nil
}

// runE is a schema subcommand's RunE: prepare (nil for none) checks the
// arguments and flags and reads the input, so that their mistakes are
// reported before a client is made; then run runs with a client of the
// registry the flags name.
func (rf *registryFlags) runE(prepare func(cmd *cobra.Command, args []string) error,
	run func(cmd *cobra.Command, args []string, cl *sr.Client) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if prepare != nil {
			if err := prepare(cmd, args); err != nil {
				return err
			}
		}
		cl, err := rf.client()
		if err != nil {
			return err
		}
		return run(cmd, args, cl)
	}
}

// contextWith is the command's context, with p when on.
func contextWith(cmd *cobra.Command, on bool, p sr.Param) context.Context {
	if on {
		return sr.WithParams(cmd.Context(), p)
	}
	return cmd.Context()
}

// srErr words a registry error as the registry did, with its code.
func srErr(what string, err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return fmt.Errorf("%s: %s (HTTP %d, error code %d)", what, re.Message, re.StatusCode, re.ErrorCode)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func newSchemaListCmd() *cobra.Command {
	var deleted bool
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List subjects with their versions and latest schema id",
		Example: "  sluice schema list\n  sluice schema list --deleted --registry http://registry:8081",
		Args:    exactArgs(0, "no arguments"),
	}
	rf := addRegistryFlags(cmd)
	cmd.Flags().BoolVar(&deleted, "deleted", false, "include soft-deleted subjects and versions")
	cmd.RunE = rf.runE(nil, func(cmd *cobra.Command, _ []string, cl *sr.Client) error {
		ctx := contextWith(cmd, deleted, sr.ShowDeleted)
		subjects, err := cl.Subjects(ctx)
		if err != nil {
			return srErr("schema list", err)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SUBJECT\tVERSIONS\tLATEST ID\tTYPE")
		for _, s := range subjects {
			vs, err := cl.SubjectVersions(ctx, s)
			if err != nil {
				return srErr("schema list "+s, err)
			}
			latest, err := cl.SchemaByVersion(ctx, s, vs[len(vs)-1])
			if err != nil {
				return srErr("schema list "+s, err)
			}
			strs := make([]string, len(vs))
			for i, v := range vs {
				strs[i] = strconv.Itoa(v)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s, strings.Join(strs, ","), latest.ID, latest.Type)
		}
		return tw.Flush()
	})
	return cmd
}

// parseVersionFlag reads --version: a number, latest (-1) or, where
// allowed, all (-2).
func parseVersionFlag(v string, allowAll bool) (int, error) {
	switch v {
	case "", "latest":
		return -1, nil
	case "all":
		if allowAll {
			return -2, nil
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		if allowAll {
			return 0, usagef("--version %q: want a version number, latest or all", v)
		}
		return 0, usagef("--version %q: want a version number or latest", v)
	}
	return n, nil
}

func newSchemaGetCmd() *cobra.Command {
	var version string
	var id int
	cmd := &cobra.Command{
		Use:   "get [SUBJECT]",
		Short: "Print a schema: a subject's version (default latest) or the schema of an id",
		Example: `  sluice schema get orders-value
  sluice schema get orders-value --version 2
  sluice schema get --id 7`,
		Args: rangeArgs(0, 1, "a subject, or --id"),
	}
	rf := addRegistryFlags(cmd)
	cmd.Flags().StringVar(&version, "version", "latest", "version number or latest")
	cmd.Flags().IntVar(&id, "id", 0, "print the schema with this id instead")
	cmd.RunE = rf.runE(func(_ *cobra.Command, args []string) error {
		if (len(args) == 1) == (id > 0) {
			return usagef("schema get: give a subject or --id, not both")
		}
		return nil
	}, func(cmd *cobra.Command, args []string, cl *sr.Client) error {
		out := cmd.OutOrStdout()
		if id > 0 {
			s, err := cl.SchemaByID(cmd.Context(), id)
			if err != nil {
				return srErr(fmt.Sprintf("schema get --id %d", id), err)
			}
			fmt.Fprintf(out, "# id %d, type %s%s\n%s\n", id, s.Type, refsNote(s.References), s.Schema)
			return nil
		}
		v, err := parseVersionFlag(version, false)
		if err != nil {
			return err
		}
		s, err := cl.SchemaByVersion(cmd.Context(), args[0], v)
		if err != nil {
			return srErr("schema get "+args[0], err)
		}
		fmt.Fprintf(out, "# subject %s, version %d, id %d, type %s%s\n%s\n", s.Subject, s.Version, s.ID, s.Type, refsNote(s.References), s.Schema.Schema)
		return nil
	})
	return cmd
}

func refsNote(refs []sr.SchemaReference) string {
	if len(refs) == 0 {
		return ""
	}
	var rs []string
	for _, r := range refs {
		rs = append(rs, fmt.Sprintf("%s=%s:%d", r.Name, r.Subject, r.Version))
	}
	return ", references " + strings.Join(rs, " ")
}

// schemaInput reads --file (- for standard input), --type and
// --reference into a schema.
type schemaInput struct {
	file, typ string
	refs      []string
}

func (si *schemaInput) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&si.file, "file", "", "the schema's file (- for standard input)")
	cmd.Flags().StringVar(&si.typ, "type", "", "AVRO, PROTOBUF or JSON (default from the file name: .avsc AVRO, .proto PROTOBUF, .json JSON; else AVRO)")
	cmd.Flags().StringArrayVar(&si.refs, "reference", nil, "a schema it imports, NAME=SUBJECT:VERSION (repeatable)")
}

func (si *schemaInput) schema(in io.Reader) (sr.Schema, error) {
	if si.file == "" {
		return sr.Schema{}, usagef("give the schema with --file FILE (or --file - for standard input)")
	}
	var text []byte
	var err error
	if si.file == "-" {
		text, err = io.ReadAll(in)
	} else {
		text, err = os.ReadFile(si.file)
	}
	if err != nil {
		return sr.Schema{}, fmt.Errorf("--file: %w", err)
	}
	typ := strings.ToUpper(si.typ)
	if typ == "" {
		switch {
		case strings.HasSuffix(si.file, ".proto"):
			typ = "PROTOBUF"
		case strings.HasSuffix(si.file, ".json"):
			typ = "JSON"
		default:
			typ = "AVRO"
		}
	}
	var st sr.SchemaType
	if err := st.UnmarshalText([]byte(typ)); err != nil {
		return sr.Schema{}, usagef("--type %q: want AVRO, PROTOBUF or JSON", si.typ)
	}
	s := sr.Schema{Schema: string(text), Type: st}
	for _, r := range si.refs {
		name, rest, ok1 := strings.Cut(r, "=")
		subject, ver, ok2 := strings.Cut(rest, ":")
		v, err := strconv.Atoi(ver)
		if !ok1 || !ok2 || name == "" || subject == "" || err != nil {
			return sr.Schema{}, usagef("--reference %q: want NAME=SUBJECT:VERSION", r)
		}
		s.References = append(s.References, sr.SchemaReference{Name: name, Subject: subject, Version: v})
	}
	return s, nil
}

func newSchemaRegisterCmd() *cobra.Command {
	var si schemaInput
	var normalize bool
	cmd := &cobra.Command{
		Use:   "register SUBJECT",
		Short: "Register a schema under a subject (the same schema again keeps its id and version)",
		Example: `  sluice schema register orders-value --file order.avsc
  sluice schema register orders-value --file order.proto --reference money.proto=money:1`,
		Args: exactArgs(1, "a subject"),
	}
	rf := addRegistryFlags(cmd)
	si.addFlags(cmd)
	cmd.Flags().BoolVar(&normalize, "normalize", false, "store the schema normalized (normalize=true)")
	var s sr.Schema
	cmd.RunE = rf.runE(func(cmd *cobra.Command, _ []string) (err error) {
		s, err = si.schema(cmd.InOrStdin())
		return err
	}, func(cmd *cobra.Command, args []string, cl *sr.Client) error {
		ss, err := cl.CreateSchema(contextWith(cmd, normalize, sr.Normalize), args[0], s)
		if err != nil {
			return srErr("schema register "+args[0], err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "registered %s version %d id %d\n", ss.Subject, ss.Version, ss.ID)
		return nil
	})
	return cmd
}

func newSchemaDeleteCmd() *cobra.Command {
	var version int
	var permanent bool
	cmd := &cobra.Command{
		Use:   "delete SUBJECT",
		Short: "Delete a subject or one of its versions (soft; --permanent also removes it for good)",
		Example: `  sluice schema delete orders-value
  sluice schema delete orders-value --version 2 --permanent`,
		Args: exactArgs(1, "a subject"),
	}
	rf := addRegistryFlags(cmd)
	cmd.Flags().IntVar(&version, "version", 0, "delete only this version")
	cmd.Flags().BoolVar(&permanent, "permanent", false, "after the soft delete, delete permanently (hard delete)")
	cmd.RunE = rf.runE(nil, func(cmd *cobra.Command, args []string, cl *sr.Client) error {
		subject, ctx := args[0], cmd.Context()
		out := cmd.OutOrStdout()
		if version > 0 {
			// 40406: the version is soft-deleted already.
			if err := deleteSoftThenHard(permanent, 40406, func(how sr.DeleteHow) error {
				return cl.DeleteSchema(ctx, subject, version, how)
			}); err != nil {
				return srErr("schema delete "+subject, err)
			}
			fmt.Fprintf(out, "deleted %s version %d%s\n", subject, version, permanentNote(permanent))
			return nil
		}
		var vs []int
		// 40404: the subject is soft-deleted already.
		if err := deleteSoftThenHard(permanent, 40404, func(how sr.DeleteHow) (err error) {
			vs, err = cl.DeleteSubject(ctx, subject, how)
			return err
		}); err != nil {
			return srErr("schema delete "+subject, err)
		}
		fmt.Fprintf(out, "deleted %s versions %v%s\n", subject, vs, permanentNote(permanent))
		return nil
	})
	return cmd
}

// deleteSoftThenHard deletes with del softly and then, with permanent,
// for good (the registry hard-deletes only what is soft-deleted). Before
// a hard delete, a soft delete failing with code softDeleted (what is
// soft-deleted already) is no error.
func deleteSoftThenHard(permanent bool, softDeleted int, del func(sr.DeleteHow) error) error {
	if err := del(sr.SoftDelete); err != nil && !(permanent && isCode(err, softDeleted)) {
		return err
	}
	if permanent {
		return del(sr.HardDelete)
	}
	return nil
}

func permanentNote(p bool) string {
	if p {
		return " permanently"
	}
	return ""
}

func isCode(err error, code int) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.ErrorCode == code
}

func newSchemaCompatibilityCmd() *cobra.Command {
	var si schemaInput
	var version string
	cmd := &cobra.Command{
		Use:   "compatibility SUBJECT",
		Short: "Check whether a schema may follow a subject's versions under its compatibility level (exit 1 if not)",
		Example: `  sluice schema compatibility orders-value --file order-v2.avsc
  sluice schema compatibility orders-value --file order-v2.avsc --version all`,
		Args: exactArgs(1, "a subject"),
	}
	rf := addRegistryFlags(cmd)
	si.addFlags(cmd)
	cmd.Flags().StringVar(&version, "version", "latest", "check against this version, latest, or all (the level decides which)")
	var v int
	var s sr.Schema
	cmd.RunE = rf.runE(func(cmd *cobra.Command, _ []string) (err error) {
		if v, err = parseVersionFlag(version, true); err != nil {
			return err
		}
		s, err = si.schema(cmd.InOrStdin())
		return err
	}, func(cmd *cobra.Command, args []string, cl *sr.Client) error {
		res, err := cl.CheckCompatibility(sr.WithParams(cmd.Context(), sr.Verbose), args[0], v, s)
		if err != nil {
			return srErr("schema compatibility "+args[0], err)
		}
		if res.Is {
			fmt.Fprintln(cmd.OutOrStdout(), "compatible")
			return nil
		}
		return fmt.Errorf("schema compatibility %s: incompatible: %s", args[0], strings.Join(res.Messages, "; "))
	})
	return cmd
}

func newSchemaConfigCmd() *cobra.Command {
	var level, mode string
	cmd := &cobra.Command{
		Use:   "config [SUBJECT]",
		Short: "Show or set the compatibility level and mode, global or of a subject",
		Long: `Show the compatibility level and mode that apply (to SUBJECT, or the
global ones); --set LEVEL sets the level (NONE, BACKWARD, BACKWARD_TRANSITIVE,
FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE), --mode the mode
(READWRITE, READONLY, IMPORT).`,
		Example: `  sluice schema config
  sluice schema config orders-value --set FULL_TRANSITIVE
  sluice schema config --mode READONLY`,
		Args: rangeArgs(0, 1, "at most a subject"),
	}
	rf := addRegistryFlags(cmd)
	cmd.Flags().StringVar(&level, "set", "", "set the compatibility level")
	cmd.Flags().StringVar(&mode, "mode", "", "set the mode")
	cmd.RunE = rf.runE(nil, func(cmd *cobra.Command, args []string, cl *sr.Client) error {
		subject := ""
		if len(args) == 1 {
			subject = args[0]
		}
		ctx := cmd.Context()
		if level != "" {
			var l sr.CompatibilityLevel
			if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
				return usagef("--set %q: want NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL or FULL_TRANSITIVE", level)
			}
			if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: l}, subject); r[0].Err != nil {
				return srErr("schema config", r[0].Err)
			}
		}
		if mode != "" {
			var m sr.Mode
			if err := m.UnmarshalText([]byte(strings.ToUpper(mode))); err != nil {
				return usagef("--mode %q: want READWRITE, READONLY or IMPORT", mode)
			}
			if r := cl.SetMode(ctx, m, subject); r[0].Err != nil {
				return srErr("schema config", r[0].Err)
			}
		}
		gctx := sr.WithParams(ctx, sr.DefaultToGlobal)
		c := cl.Compatibility(gctx, subject)
		if c[0].Err != nil {
			return srErr("schema config", c[0].Err)
		}
		m := cl.Mode(gctx, subject)
		if m[0].Err != nil {
			return srErr("schema config", m[0].Err)
		}
		who := "global"
		if subject != "" {
			who = subject
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: compatibility %s, mode %s\n", who, c[0].Level, m[0].Mode)
		return nil
	})
	return cmd
}
