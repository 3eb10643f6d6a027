package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version sluice was built with",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, ok := debug.ReadBuildInfo()
			if !ok {
				return fmt.Errorf("version: this binary carries no build information")
			}
			printVersion(cmd.OutOrStdout(), bi)
			return nil
		},
	}
}

// printVersion writes the module version, the VCS commit (with its time
// and whether the tree had local changes) and the Go version.
func printVersion(w io.Writer, bi *debug.BuildInfo) {
	version := bi.Main.Version
	if version == "" {
		version = "(unknown)"
	}
	fmt.Fprintf(w, "sluice %s\n", version)
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	commit := settings["vcs.revision"]
	if commit == "" {
		commit = "unknown"
	}
	if t := settings["vcs.time"]; t != "" {
		commit += " (" + t + ")"
	}
	if settings["vcs.modified"] == "true" {
		commit += " with local changes"
	}
	fmt.Fprintf(w, "commit %s\n", commit)
	fmt.Fprintf(w, "go %s\n", bi.GoVersion)
}
