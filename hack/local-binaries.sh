#!/usr/bin/env bash
# Builds the tools the local cluster provider needs besides the control plane: kwokctl (the
# lifecycle engine behind `--runtime binary`) from the Go module proxy, into a versioned cache
# directory, skipping it when present. Prints the kwokctl path on the last line of stdout;
# progress goes to stderr.
#
#   hack/local-binaries.sh
#   KWOK_VERSION=v0.8.0 hack/local-binaries.sh
set -euo pipefail
# hack/tools/kwok lives outside go.work on purpose: kwok's Kubernetes library versions must not
# meet the workspace's build list.

KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
CACHE_DIR=${GAUNTLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet}
OUT="$CACHE_DIR/tools/kwok-$KWOK_VERSION/kwokctl"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

pinned=$(cd "$ROOT/hack/tools/kwok" && GOWORK=off go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
if [[ "$KWOK_VERSION" != "$pinned" ]]; then
  echo "local-binaries: KWOK_VERSION=$KWOK_VERSION but hack/tools/kwok/go.mod pins $pinned;" >&2
  echo "  run 'go get sigs.k8s.io/kwok@$KWOK_VERSION' there (GOWORK=off) to change it." >&2
  exit 2
fi

if [[ -x "$OUT" ]]; then
  printf '• %-26s %s\n' kwokctl "cached ($OUT)" >&2
else
  t0=$SECONDS
  printf '• %-26s %s\n' kwokctl "building sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION (about a minute cold)…" >&2
  mkdir -p "$(dirname "$OUT")"
  (cd "$ROOT/hack/tools/kwok" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT.$$.tmp" sigs.k8s.io/kwok/cmd/kwokctl)
  mv "$OUT.$$.tmp" "$OUT"
  printf '• %-26s %s\n' kwokctl "✓ built in $((SECONDS - t0))s" >&2
fi
echo "$OUT"
