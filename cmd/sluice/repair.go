package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/internal/repair"
	"github.com/sluicedb/sluice/internal/vfs"
)

// newRepairCmd is `sluice repair`: check the partition logs of a stopped
// broker's data directory and, with --truncate-after-corruption, cut a
// corrupt log at its last valid batch (keeping a copy).
func newRepairCmd() *cobra.Command {
	o := repair.Options{Partition: -1}
	var partition int32 = -1
	cmd := &cobra.Command{
		Use:   "repair --data DIR [--topic T --partition P] [--truncate-after-corruption]",
		Short: "Check a stopped broker's partition logs; cut corrupt ones at their last valid batch",
		Long: `Repair checks every batch (CRC included) of the partition logs in a data
directory. It refuses a directory a running broker holds. Without
--truncate-after-corruption it only reports; with it, each corrupt log is
cut at the last valid batch before the corruption: the corrupt segment is
copied to <segment>.broken first and later segments are renamed to
<segment>.broken, and it prints the offsets and bytes removed.`,
		Example: `  sluice repair --data ./sluice-data
  sluice repair --data ./sluice-data --topic orders --partition 0 --truncate-after-corruption`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("data") {
				o.Data = os.Getenv("SLUICE_DATA")
			}
			if o.Data == "" {
				return usagef("repair: --data is required (or SLUICE_DATA)")
			}
			if cmd.Flags().Changed("partition") && o.Topic == "" {
				return usagef("repair: --partition needs --topic")
			}
			o.Partition = partition
			_, err := repair.Run(vfs.OS(), o, cmd.OutOrStdout())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Data, "data", "", "data directory of a stopped broker (env SLUICE_DATA)")
	f.StringVar(&o.Topic, "topic", "", "only this topic")
	f.Int32Var(&partition, "partition", -1, "only this partition of --topic")
	f.BoolVar(&o.Truncate, "truncate-after-corruption", false, "cut each corrupt log at its last valid batch (a copy is kept)")
	return cmd
}
