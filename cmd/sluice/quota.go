package main

// sluice quota: client quotas (DescribeClientQuotas, AlterClientQuotas;
// works against Sluice, Kafka and Redpanda), shaped like rpk's
// `cluster quotas`.
//
//	sluice quota describe [--name TYPE=NAME]... [--default TYPE]... [--any TYPE]... [--strict] [--format text|json]
//	sluice quota alter --name TYPE=NAME | --default TYPE ... --add KEY=VALUE... --delete KEY... [--dry]
//	sluice quota import --from FILE [--dry]

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

func newQuotaCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Describe, alter and import client quotas",
		Long: `Client quotas limit what a user, a client id or both may use:
producer_byte_rate and consumer_byte_rate (bytes per second),
request_percentage (percent of one request thread's time) and
controller_mutation_rate (partitions created or deleted per second).
An entity part is named (--name client-id=app) or the default of its
level (--default client-id). The broker holds a client to its limit by
answering with a throttle time and not reading from its connection
meanwhile.`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	cmd.AddCommand(newQuotaDescribeCmd(), newQuotaAlterCmd(), newQuotaImportCmd())
	return cmd
}

// quotaEntityFlags are --name TYPE=NAME and --default TYPE.
type quotaEntityFlags struct {
	names, defaults []string
}

func (q *quotaEntityFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().StringArrayVar(&q.names, "name", nil, what+" an entity part by name: user=NAME or client-id=NAME (repeatable)")
	cmd.Flags().StringArrayVar(&q.defaults, "default", nil, what+" an entity part's default: user or client-id (repeatable)")
}

func checkQuotaType(t string) error {
	if t != "user" && t != "client-id" {
		return usagef("entity type %q: want user or client-id", t)
	}
	return nil
}

func splitKV(s, flag string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", usagef("--%s %q: want KEY=VALUE", flag, s)
	}
	return k, v, nil
}

// entity builds the entity of alter from the flags.
func (q *quotaEntityFlags) entity() ([]kadm.ClientQuotaEntityComponent, error) {
	var es []kadm.ClientQuotaEntityComponent
	for _, n := range q.names {
		t, v, err := splitKV(n, "name")
		if err != nil {
			return nil, err
		}
		if err := checkQuotaType(t); err != nil {
			return nil, err
		}
		es = append(es, kadm.ClientQuotaEntityComponent{Type: t, Name: &v})
	}
	for _, t := range q.defaults {
		if err := checkQuotaType(t); err != nil {
			return nil, err
		}
		es = append(es, kadm.ClientQuotaEntityComponent{Type: t})
	}
	if len(es) == 0 {
		return nil, usagef("name the entity: --name user=NAME, --name client-id=NAME, --default user or --default client-id")
	}
	return es, nil
}

func newQuotaDescribeCmd() *cobra.Command {
	var ef quotaEntityFlags
	var anys []string
	var strict bool
	var format string
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "List client quotas, all or those matching filters",
		Long: `List the client quotas whose entity matches every filter: --name
TYPE=NAME (that name), --default TYPE (the default), --any TYPE (named
or default). With --strict an entity must have no part beyond those the
filters name. No filter lists every quota.`,
		Example: "  sluice quota describe\n  sluice quota describe --name client-id=app\n  sluice quota describe --any user --strict --format json",
		Args:    exactArgs(0, "no arguments"),
	}
	ef.add(cmd, "match")
	cmd.Flags().StringArrayVar(&anys, "any", nil, "match an entity part of this type, named or default: user or client-id (repeatable)")
	cmd.Flags().BoolVar(&strict, "strict", false, "match only entities with no part beyond the filters'")
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	cf := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if format != "text" && format != "json" {
			return usagef("quota describe: --format %q: want text or json", format)
		}
		var cs []kadm.DescribeClientQuotaComponent
		for _, n := range ef.names {
			t, v, err := splitKV(n, "name")
			if err != nil {
				return err
			}
			if err := checkQuotaType(t); err != nil {
				return err
			}
			cs = append(cs, kadm.DescribeClientQuotaComponent{Type: t, MatchName: &v, MatchType: 0})
		}
		for _, t := range ef.defaults {
			if err := checkQuotaType(t); err != nil {
				return err
			}
			cs = append(cs, kadm.DescribeClientQuotaComponent{Type: t, MatchType: 1})
		}
		for _, t := range anys {
			if err := checkQuotaType(t); err != nil {
				return err
			}
			cs = append(cs, kadm.DescribeClientQuotaComponent{Type: t, MatchType: 2})
		}
		return cf.runStep(cmd, func(ctx context.Context, conn *conn) error {
			qs, err := conn.adm.DescribeClientQuotas(ctx, strict, cs)
			if err != nil {
				return conn.wrap("quota describe", err)
			}
			return printQuotas(cmd.OutOrStdout(), toQuotaFile(qs), format)
		})
	}
	return cmd
}

// quotaFile is describe's JSON and import's input (rpk's shape).
type quotaFile struct {
	Quotas []quotaFileEntry `json:"quotas"`
}

type quotaFileEntry struct {
	Entity []quotaFileEntity `json:"entity"`
	Values []quotaFileValue  `json:"values"`
}

type quotaFileEntity struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"` // absent: the default
}

type quotaFileValue struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func entityName(c kadm.ClientQuotaEntityComponent) string {
	if c.Name == nil {
		return c.Type + "=<default>"
	}
	return c.Type + "=" + *c.Name
}

func toQuotaFile(qs kadm.DescribedClientQuotas) quotaFile {
	f := quotaFile{Quotas: []quotaFileEntry{}}
	for _, q := range qs {
		var e quotaFileEntry
		for _, c := range q.Entity {
			fe := quotaFileEntity{Type: c.Type}
			if c.Name != nil {
				fe.Name = *c.Name
			}
			e.Entity = append(e.Entity, fe)
		}
		for _, v := range q.Values {
			e.Values = append(e.Values, quotaFileValue{Key: v.Key, Value: strconv.FormatFloat(v.Value, 'f', -1, 64)})
		}
		sort.Slice(e.Values, func(i, j int) bool { return e.Values[i].Key < e.Values[j].Key })
		f.Quotas = append(f.Quotas, e)
	}
	sort.Slice(f.Quotas, func(i, j int) bool { return entityString(f.Quotas[i].Entity) < entityString(f.Quotas[j].Entity) })
	return f
}

func entityString(es []quotaFileEntity) string {
	parts := make([]string, 0, len(es))
	for _, e := range es {
		n := e.Name
		if n == "" {
			n = "<default>"
		}
		parts = append(parts, e.Type+"="+n)
	}
	return strings.Join(parts, ", ")
}

func printQuotas(out io.Writer, f quotaFile, format string) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(f)
	}
	if len(f.Quotas) == 0 {
		fmt.Fprintln(out, "no quotas")
		return nil
	}
	for _, q := range f.Quotas {
		fmt.Fprintln(out, entityString(q.Entity))
		for _, v := range q.Values {
			fmt.Fprintf(out, "\t%s=%s\n", v.Key, v.Value)
		}
	}
	return nil
}

func newQuotaAlterCmd() *cobra.Command {
	var ef quotaEntityFlags
	var adds, dels []string
	var dry bool
	cmd := &cobra.Command{
		Use:   "alter",
		Short: "Set or delete an entity's client quotas",
		Long: `Set (--add KEY=VALUE) or delete (--delete KEY) quotas of one entity:
a user, a client id or both, each named (--name TYPE=NAME) or the
default (--default TYPE). The broker stores the change durably and
enforces it at once. --dry checks the change without applying it.`,
		Example: "  sluice quota alter --name client-id=app --add producer_byte_rate=1048576\n  sluice quota alter --default user --add request_percentage=50\n  sluice quota alter --name client-id=app --delete producer_byte_rate",
		Args:    exactArgs(0, "no arguments"),
	}
	ef.add(cmd, "the entity:")
	cmd.Flags().StringArrayVar(&adds, "add", nil, "set a quota: KEY=VALUE, KEY one of producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate (repeatable)")
	cmd.Flags().StringArrayVar(&dels, "delete", nil, "delete a quota: KEY (repeatable)")
	cmd.Flags().BoolVar(&dry, "dry", false, "validate only: check the change, apply nothing")
	cf := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ent, err := ef.entity()
		if err != nil {
			return err
		}
		if len(adds)+len(dels) == 0 {
			return usagef("quota alter: give --add KEY=VALUE or --delete KEY")
		}
		var ops []kadm.AlterClientQuotaOp
		for _, a := range adds {
			k, v, err := splitKV(a, "add")
			if err != nil {
				return err
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return usagef("--add %s: %q is not a number", k, v)
			}
			ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
		}
		for _, d := range dels {
			ops = append(ops, kadm.AlterClientQuotaOp{Key: d, Remove: true})
		}
		conn, err := cf.connect(cmd.Context())
		if err != nil {
			return err
		}
		defer conn.Close()
		return alterQuotas(cmd.Context(), conn, cmd.OutOrStdout(), []kadm.AlterClientQuotaEntry{{Entity: ent, Ops: ops}}, dry)
	}
	return cmd
}

// alterQuotas sends the entries and prints one line per entity.
func alterQuotas(ctx context.Context, conn *conn, out io.Writer, entries []kadm.AlterClientQuotaEntry, dry bool) error {
	ctx, cancel := conn.step(ctx)
	defer cancel()
	alter := conn.adm.AlterClientQuotas
	verb := "altered"
	if dry {
		alter, verb = conn.adm.ValidateAlterClientQuotas, "valid (not applied)"
	}
	res, err := alter(ctx, entries)
	if err != nil {
		return conn.wrap("quota alter", err)
	}
	var failed []string
	for _, r := range res {
		names := make([]string, 0, len(r.Entity))
		for _, c := range r.Entity {
			names = append(names, entityName(c))
		}
		ent := strings.Join(names, ", ")
		if r.Err != nil {
			msg := r.Err.Error()
			if r.ErrMessage != "" {
				msg += ": " + r.ErrMessage
			}
			failed = append(failed, ent+": "+msg)
			continue
		}
		fmt.Fprintf(out, "%s %s\n", verb, ent)
	}
	if len(failed) > 0 {
		return fmt.Errorf("quota alter: %s", strings.Join(failed, "; "))
	}
	return nil
}

func newQuotaImportCmd() *cobra.Command {
	var from string
	var dry bool
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Set client quotas from a file (describe --format json's shape)",
		Long: `Set client quotas from a JSON file in the shape "quota describe
--format json" prints. Each entity in the file gets exactly the file's
values: keys it has on the broker and not in the file are deleted.
Entities not in the file are left as they are.`,
		Example: "  sluice quota describe --format json > quotas.json\n  sluice quota import --from quotas.json",
		Args:    exactArgs(0, "no arguments"),
	}
	cmd.Flags().StringVar(&from, "from", "", "the JSON file (- for stdin)")
	cmd.Flags().BoolVar(&dry, "dry", false, "validate only: check the changes, apply nothing")
	cf := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if from == "" {
			return usagef("quota import: give --from FILE")
		}
		var data []byte
		var err error
		if from == "-" {
			data, err = io.ReadAll(cmd.InOrStdin())
		} else {
			data, err = os.ReadFile(from)
		}
		if err != nil {
			return fmt.Errorf("quota import: %w", err)
		}
		var f quotaFile
		if err := json.Unmarshal(data, &f); err != nil {
			return fmt.Errorf("quota import: %s: %w", from, err)
		}
		return cf.runStep(cmd, func(ctx context.Context, conn *conn) error {
			current, err := conn.adm.DescribeClientQuotas(ctx, false, nil)
			if err != nil {
				return conn.wrap("quota import", err)
			}
			have := map[string][]string{} // entity → keys on the broker
			for _, q := range toQuotaFile(current).Quotas {
				for _, v := range q.Values {
					have[entityString(q.Entity)] = append(have[entityString(q.Entity)], v.Key)
				}
			}
			var entries []kadm.AlterClientQuotaEntry
			for i, q := range f.Quotas {
				var e kadm.AlterClientQuotaEntry
				for _, c := range q.Entity {
					if err := checkQuotaType(c.Type); err != nil {
						return fmt.Errorf("quota import: entry %d: %w", i, err)
					}
					comp := kadm.ClientQuotaEntityComponent{Type: c.Type}
					if c.Name != "" {
						name := c.Name
						comp.Name = &name
					}
					e.Entity = append(e.Entity, comp)
				}
				set := map[string]bool{}
				for _, v := range q.Values {
					val, err := strconv.ParseFloat(v.Value, 64)
					if err != nil {
						return fmt.Errorf("quota import: entry %d: %s=%q is not a number", i, v.Key, v.Value)
					}
					e.Ops = append(e.Ops, kadm.AlterClientQuotaOp{Key: v.Key, Value: val})
					set[v.Key] = true
				}
				for _, k := range have[entityString(q.Entity)] {
					if !set[k] {
						e.Ops = append(e.Ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
					}
				}
				if len(e.Entity) == 0 || len(e.Ops) == 0 {
					return fmt.Errorf("quota import: entry %d has no entity or no values", i)
				}
				entries = append(entries, e)
			}
			if len(entries) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing to import")
				return nil
			}
			return alterQuotas(cmd.Context(), conn, cmd.OutOrStdout(), entries, dry)
		})
	}
	return cmd
}
