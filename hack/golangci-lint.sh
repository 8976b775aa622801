#!/usr/bin/env bash
# Builds golangci-lint, pinned by hack/tools/golangci-lint/go.mod, from the Go module proxy into a
# versioned cache directory, skipping it when present (a new pin is a new directory, so changing
# the pin rebuilds). Prints the binary's path on the last line of stdout; progress goes to stderr.
#
#   hack/golangci-lint.sh
set -euo pipefail
# hack/tools/golangci-lint lives outside go.work on purpose: the linters' dependency versions must
# not meet the workspace's build list.

CACHE_DIR=${GAUNTLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MOD=github.com/golangci/golangci-lint/v2

version=$(cd "$ROOT/hack/tools/golangci-lint" && GOWORK=off go list -m -f '{{.Version}}' "$MOD")
OUT="$CACHE_DIR/tools/golangci-lint-$version/golangci-lint"

if [[ -x "$OUT" ]]; then
  printf '• %-26s %s\n' golangci-lint "cached ($OUT)" >&2
else
  t0=$SECONDS
  printf '• %-26s %s\n' golangci-lint "building $MOD/cmd/golangci-lint@$version (a few minutes cold on 2 cores)…" >&2
  mkdir -p "$(dirname "$OUT")"
  # No version ldflags needed: golangci-lint reads its version from the build info.
  (cd "$ROOT/hack/tools/golangci-lint" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
    -o "$OUT.tmp" "$MOD/cmd/golangci-lint")
  mv "$OUT.tmp" "$OUT"
  printf '• %-26s %s\n' golangci-lint "✓ built in $((SECONDS - t0))s" >&2
fi
echo "$OUT"
