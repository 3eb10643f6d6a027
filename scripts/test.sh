#!/usr/bin/env bash
# The test command: every package's tests, with any extra flags passed on
# (CI adds -race). Integration tests start real brokers on 127.0.0.1 and
# drive them with real clients, kcat included when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -count=1 -timeout 15m "$@" ./...
