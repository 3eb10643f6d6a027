// Command sluice runs a Sluice broker: a durable, Kafka-wire-compatible
// streaming log in one binary.
//
//	sluice serve [--data DIR] [--listen HOST:PORT] [--advertise HOST:PORT] [--fsync always|interval|never] [--auto-create=true] [--metrics HOST:PORT]
//	sluice topic|produce|consume|group ...   (client commands; see client.go)
//	sluice mirror --from ADDR --to ADDR ...  (see mirror.go)
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

const usage = `usage: sluice <command> [flags]

commands:
  serve     run a broker (sluice serve -h for its flags)
  topic     create, list or delete topics (sluice topic create NAME -p 3)
  produce   write stdin lines as records, acks=all (sluice produce -t TOPIC -K :)
  consume   print records (sluice consume -t TOPIC -e, or -G GROUP)
  group     list groups, or describe their members and lag
  mirror    copy topics, records and group offsets to another cluster (sluice mirror -h)

Client commands take -b BROKERS (env SLUICE_BROKERS, default 127.0.0.1:9092)
and work against any Kafka-compatible broker.
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
	case "topic":
		err = topicCmd(os.Args[2:], os.Stdout)
	case "produce":
		err = produceCmd(os.Args[2:], os.Stdin, os.Stderr)
	case "consume":
		err = consumeCmd(os.Args[2:], os.Stdout)
	case "group":
		err = groupCmd(os.Args[2:], os.Stdout)
	case "mirror":
		// Adapter until the command line moves to cobra: run the cobra
		// command on its own.
		cmd := newMirrorCmd()
		cmd.SetArgs(os.Args[2:])
		err = cmd.Execute()
	case "bench":
		cmd := newBenchCmd()
		cmd.SetArgs(os.Args[2:])
		err = cmd.Execute()
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
