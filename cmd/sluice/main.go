// Command sluice runs a Sluice broker: a durable, Kafka-wire-compatible
// streaming log in one binary.
//
//	sluice serve [--data DIR] [--listen HOST:PORT] [--advertise HOST:PORT] [--fsync always|interval|never] [--auto-create=true] [--metrics HOST:PORT]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

const usage = `usage: sluice <command> [flags]

commands:
  serve   run a broker (sluice serve -h for its flags)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "sluice: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // the flag package has printed the usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

// envOr returns the environment variable name, or def when it is unset.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
