#!/usr/bin/env bash
# The test command: every package's tests, with any extra flags passed on
# (CI adds -race). Integration tests start real brokers on 127.0.0.1 and
# drive them with real clients, kcat included when it is installed.
# The nested modules (integration/, with the Kafka clients only its tests
# use; examples/, built as a program outside this module would) run after
# the main module, with the same flags.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -count=1 -timeout 15m "$@" ./...
for m in integration examples; do
  go -C "$m" test -count=1 -timeout 15m "$@" ./...
done
