package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/internal/console"
)

// newHealthCmd is `sluice health`: a health check for places with no
// curl, such as the container image's HEALTHCHECK.
func newHealthCmd() *cobra.Command {
	var addr string
	var live bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check a running broker's /readyz (or /healthz with --live) over HTTP; exit 0 when it answers 200",
		Long: `Check a running sluice serve through its HTTP server: GET /readyz (or
/healthz with --live) and exit 0 on 200 OK, 1 otherwise with the
broker's reason. --http defaults to SLUICE_HTTP, as serve's does, so a
container's health check needs no flags.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := "/readyz"
			if live {
				path = "/healthz"
			}
			return checkHealth(cmd.Context(), cmd.OutOrStdout(), addr, path, timeout)
		},
	}
	def := console.DefaultAddr
	if v, ok := os.LookupEnv("SLUICE_HTTP"); ok && v != "" {
		def = v
	}
	cmd.Flags().StringVar(&addr, "http", def, "the broker's HTTP address (serve's --http; env SLUICE_HTTP)")
	cmd.Flags().BoolVar(&live, "live", false, "check /healthz (the process serves) instead of /readyz (it can take writes)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

func checkHealth(ctx context.Context, w io.Writer, addr, path string, timeout time.Duration) error {
	host := addr
	if h, p, err := net.SplitHostPort(addr); err == nil && (h == "" || h == "0.0.0.0" || h == "::") {
		host = net.JoinHostPort("127.0.0.1", p) // a wildcard bind answers on loopback
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + host + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health: %s: %w (is sluice serve running with --http %s?)", url, err, addr)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	text := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s: %s: %s", url, resp.Status, text)
	}
	fmt.Fprintln(w, text)
	return nil
}
