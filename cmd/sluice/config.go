package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// envName is the environment variable of a serve flag: SLUICE_ and the
// flag name in capitals with dashes as underscores.
func envName(flag string) string {
	return "SLUICE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyConfig fills every flag of fs not given on the command line from
// its environment variable, else from the YAML file named by --config
// (or SLUICE_CONFIG): flags > environment > file > defaults. Unknown
// file keys and values that do not parse are errors naming their source.
func applyConfig(fs *pflag.FlagSet) error {
	path, _ := fs.GetString("config")
	if !fs.Changed("config") {
		path = os.Getenv(envName("config"))
	}
	file := map[string]configValue{}
	if path != "" {
		var err error
		if file, err = readConfigFile(path, fs); err != nil {
			return err
		}
	}
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "config" || f.Name == "help" || f.Changed {
			return
		}
		env := envName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %s", env, v, want(f, err)))
			}
			return
		}
		if v, ok := file[f.Name]; ok {
			if err := f.Value.Set(v.value); err != nil {
				errs = append(errs, fmt.Errorf("config file %s: line %d: %s: %q: %s", path, v.line, f.Name, v.value, want(f, err)))
			}
		}
	})
	return errors.Join(errs...)
}

// want says what a flag's value must look like, given the error its Set
// returned.
func want(f *pflag.Flag, err error) string {
	if _, ok := f.Value.(*choiceValue); ok {
		return err.Error()
	}
	switch f.Value.Type() {
	case "bool":
		return "want true or false"
	case "int", "int32", "int64", "uint", "uint32", "uint64":
		return "want an integer"
	case "duration":
		return "want a duration such as 10s or 1m30s"
	}
	return "not a valid value"
}

// choiceValue is a string flag that takes one of a few values; Set
// refuses others, so a bad value is reported with its source (flag,
// environment variable or config file line).
type choiceValue struct {
	p     *string
	valid func(string) bool
	want  string // "want always, interval or never"
}

// choiceVar defines a string flag that only takes the values valid accepts.
func choiceVar(fs *pflag.FlagSet, p *string, name, value, want, usage string, valid func(string) bool) {
	*p = value
	fs.Var(&choiceValue{p: p, valid: valid, want: want}, name, usage)
}

// oneOf accepts exactly the given values.
func oneOf(values ...string) func(string) bool {
	return func(v string) bool { return slices.Contains(values, v) }
}

func (c *choiceValue) String() string { return *c.p }
func (c *choiceValue) Type() string   { return "string" }
func (c *choiceValue) Set(v string) error {
	if !c.valid(v) {
		return errors.New(c.want)
	}
	*c.p = v
	return nil
}

// configValue is a config file value and the line it is on.
type configValue struct {
	value string
	line  int
}

// readConfigFile reads a YAML mapping of flag names to scalar values.
func readConfigFile(path string, fs *pflag.FlagSet) (map[string]configValue, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	out := map[string]configValue{}
	if len(doc.Content) == 0 {
		return out, nil // empty file
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config file %s: want a mapping of keys to values", path)
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		f := fs.Lookup(k.Value)
		if f == nil || k.Value == "config" || k.Value == "help" {
			return nil, fmt.Errorf("config file %s: line %d: unknown key %q (known: %s)", path, k.Line, k.Value, strings.Join(configKeys(fs), ", "))
		}
		if v.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("config file %s: line %d: %s: want a single value", path, v.Line, k.Value)
		}
		if _, dup := out[k.Value]; dup {
			return nil, fmt.Errorf("config file %s: line %d: %s given twice", path, k.Line, k.Value)
		}
		out[k.Value] = configValue{value: v.Value, line: v.Line}
	}
	return out, nil
}

// configKeys lists the keys a config file may hold.
func configKeys(fs *pflag.FlagSet) []string {
	var keys []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "config" && f.Name != "help" {
			keys = append(keys, f.Name)
		}
	})
	sort.Strings(keys)
	return keys
}
