#!/usr/bin/env bash
# Builds the sluice container image from a linux sluice binary, without
# pulling anything from a registry:
#   packaging/container/build.sh dist/sluice_linux_amd64_v1/sluice sluice:dev
# (the binary of `goreleaser release --snapshot --clean`, or one from
# CGO_ENABLED=0 go build -o sluice ./cmd/sluice). Uses podman, or buildah
# when there is no podman; BUILD_FLAGS adds flags to either.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 SLUICE_BINARY IMAGE_TAG" >&2
  exit 2
fi
bin=$1 tag=$2
here=$(cd "$(dirname "$0")" && pwd)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$bin" "$ctx/sluice"
chmod 0755 "$ctx/sluice"
mkdir -m 0700 "$ctx/data"
if command -v podman >/dev/null 2>&1; then
  tool=(podman build)
else
  tool=(buildah bud)
fi
# shellcheck disable=SC2086
"${tool[@]}" --format docker --pull=never ${BUILD_FLAGS:-} -f "$here/Containerfile" -t "$tag" "$ctx"
