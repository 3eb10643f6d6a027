package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Release builds stamp these with -ldflags "-X main.version=... -X
// main.commit=... -X main.date=..." (see .goreleaser.yaml); each one set
// takes the place of what the Go build information says.
var (
	version string
	commit  string
	date    string
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
			printVersion(cmd.OutOrStdout(), stamped(bi, version, commit, date))
			return nil
		},
	}
}

// stamped returns bi with the release stamps that are set in place of
// the module version and the VCS revision and time.
func stamped(bi *debug.BuildInfo, version, commit, date string) *debug.BuildInfo {
	out := *bi
	if version != "" {
		out.Main.Version = version
	}
	var settings []debug.BuildSetting
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && commit != "", s.Key == "vcs.time" && date != "":
			continue
		case s.Key == "vcs.modified" && commit != "":
			continue
		}
		settings = append(settings, s)
	}
	if commit != "" {
		settings = append(settings, debug.BuildSetting{Key: "vcs.revision", Value: commit})
	}
	if date != "" {
		settings = append(settings, debug.BuildSetting{Key: "vcs.time", Value: date})
	}
	out.Settings = settings
	return &out
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
