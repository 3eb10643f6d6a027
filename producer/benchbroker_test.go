package producer

import (
	"fmt"
	"io"
	"os"

	"github.com/sluicedb/sluice/broker"
)

// BenchBrokerEnv, set to a data directory, makes the test binary run as a
// broker instead of running tests: BenchmarkProduce starts one so that the
// broker runs in its own process, its CPU time apart from the producer's.
const BenchBrokerEnv = "SLUICE_PRODUCER_BENCH_BROKER"

// runBenchBroker starts a broker over dir on a random port of 127.0.0.1,
// prints its address on a line of stdout, and serves until stdin is
// closed (the benchmark closes it, or exits). It returns the exit code.
func runBenchBroker(dir string) int {
	b, err := broker.New(broker.DataDir(dir), broker.ListenAddr("127.0.0.1:0"))
	if err == nil {
		err = b.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench broker:", err)
		return 1
	}
	fmt.Println(b.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := b.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "bench broker: close:", err)
		return 1
	}
	return 0
}
