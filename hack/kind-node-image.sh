#!/usr/bin/env bash
# Builds a kind node image with no image registry: every binary is built from the Go module proxy,
# the root filesystems come from Debian packages (mmdebstrap), the component images kubeadm needs
# are built FROM scratch and preloaded into the node's containerd. Recipe: kind/node-image/.
# Progress goes to stderr; the LAST line of stdout is the image reference:
#
#   gauntlet.local/kind-node:<K8S_VERSION>-<recipe hash>
#
# When that image already exists the script only prints it. Caches: binaries in
# $GAUNTLET_CACHE/k8s/<version>/bin (shared with hack/control-plane.sh), rootfs tarballs and build
# logs in $GAUNTLET_CACHE/kind/. Needs root (mmdebstrap --mode=root) on a cold cache and Docker.
#
#   hack/kind-node-image.sh
#   K8S_VERSION=v1.36.3 hack/kind-node-image.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
K8S_VERSION=${K8S_VERSION:-$("$ROOT/hack/k8s-module.sh" --newest)}
CACHE_DIR=${GAUNTLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet}
BIN_DIR="$CACHE_DIR/k8s/$K8S_VERSION/bin"
KIND_CACHE="$CACHE_DIR/kind"
RECIPE_DIR="$ROOT/kind/node-image"
SELF="$ROOT/hack/kind-node-image.sh"

# Pinned versions (the binaries' own versions are pinned by the tools modules under hack/tools).
KIND_MODULE=sigs.k8s.io/kind@v0.33.0 # base files: entrypoint, systemd units, containerd config
DEBIAN_SUITE=trixie                  # systemd 257: the last release with cgroup v1
MMDEBSTRAP_OPTS=(--mode=root --variant=minbase --format=tar
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright')
K8S_MODULE=$("$ROOT/hack/k8s-module.sh" "$K8S_VERSION")
COREDNS_VERSION=$("$ROOT/hack/k8s-module.sh" --coredns "$K8S_VERSION") # what kubeadm deploys
COREDNS_MODULE="$ROOT/hack/tools/coredns/$COREDNS_VERSION"
if [[ ! -f "$COREDNS_MODULE/go.mod" ]]; then
  echo "kind-node-image: kubeadm $K8S_VERSION deploys CoreDNS $COREDNS_VERSION, which no module under hack/tools/coredns builds;" >&2
  echo "  add it with: hack/add-k8s-version.sh $K8S_VERSION" >&2
  exit 2
fi
TOOL_MODULES=("k8s/$K8S_VERSION" etcd "coredns/$COREDNS_VERSION" cri-tools pause)

# ---- the image reference: hash of the recipe, this script and the pinned versions ------------
recipe_hash() {
  {
    printf '%s\n' "$K8S_VERSION" "$KIND_MODULE" "$DEBIAN_SUITE" "${MMDEBSTRAP_OPTS[@]}"
    (cd "$ROOT" && find kind/node-image hack/kind-node-image.sh hack/k8s-ldflags.sh \
      $(printf 'hack/tools/%s ' "${TOOL_MODULES[@]}") -type f | LC_ALL=C sort | xargs sha256sum)
  } | sha256sum | cut -c1-12
}
RECIPE=$(recipe_hash)
IMAGE="gauntlet.local/kind-node:$K8S_VERSION-$RECIPE"

docker version >/dev/null 2>&1 || { echo "✗ docker is not reachable: $(docker version 2>&1 | tail -n1)" >&2; exit 1; }
if docker image inspect --format '{{.Id}}' "$IMAGE" >/dev/null 2>&1; then
  echo "✓ $IMAGE exists (delete it with docker rmi to rebuild)" >&2
  echo "$IMAGE"
  exit 0
fi

# ---- helpers ---------------------------------------------------------------------------------
T_ALL=$SECONDS
STEP= STEP_T0=
begin() { STEP=$1 STEP_T0=$SECONDS; printf '• %s …\n' "$STEP" >&2; }
end() { printf '✓ %s in %ss\n' "$STEP" $((SECONDS - STEP_T0)) >&2; }
info() { printf '    %s\n' "$*" >&2; }
die() { printf '✗ %s\n' "$*" >&2; exit 1; }

mkdir -p "$BIN_DIR" "$KIND_CACHE/logs"
LOGS="$KIND_CACHE/logs"
logged() { # logged <log name> <command…>: output to $LOGS/<name>.log, its tail on failure
  local log="$LOGS/$1.log"
  shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 40 "$log" | sed 's/\x1b\[[0-9;]*m//g' >&2
    die "$STEP failed: $* (full log: $log)"
  fi
}

BUILD_ID="$(date +%s)-$$"
BUILD_REPO="gauntlet.local/kind-build-$BUILD_ID" # temporary tags, removed on exit
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gauntlet-kind-node.XXXXXX")
CONTAINER="gauntlet-kind-build-$BUILD_ID"
TEMP_TAGS=()             # our tags to remove on exit (children first)
declare -A RESTORE_TAG=() # registry tag -> image id it named before we tagged over it

cleanup() {
  local rc=$? tag
  docker rm -f "$CONTAINER" >/dev/null 2>&1 || true
  for tag in "${!RESTORE_TAG[@]}"; do
    if [[ -n "${RESTORE_TAG[$tag]}" ]]; then
      docker tag "${RESTORE_TAG[$tag]}" "$tag" >/dev/null 2>&1 || true
    else
      docker rmi "$tag" >/dev/null 2>&1 || true
    fi
  done
  for ((i = ${#TEMP_TAGS[@]} - 1; i >= 0; i--)); do
    docker rmi "${TEMP_TAGS[i]}" >/dev/null 2>&1 || true
  done
  # what a failed docker build leaves behind: untagged images of the steps that succeeded
  docker image prune -f --filter "label=gauntlet.kind-build=$BUILD_ID" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  if ((rc != 0)); then
    echo "✗ kind node image not built (logs: $LOGS)" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

dbuild() { # dbuild <tag> <Dockerfile> <context> [--build-arg …]
  local tag=$1 file=$2 ctx=$3
  shift 3
  TEMP_TAGS+=("$tag")
  logged "build-${tag##*:}" env DOCKER_BUILDKIT=0 docker build --force-rm --pull=false \
    -f "$file" -t "$tag" --build-arg "BUILD_ID=$BUILD_ID" "$@" "$ctx"
}

echo "• kind node image $IMAGE (recipe kind/node-image, cache $CACHE_DIR)" >&2

# ---- 1. control-plane binaries ---------------------------------------------------------------
begin "control-plane binaries (hack/control-plane.sh)"
K8S_VERSION=$K8S_VERSION "$ROOT/hack/control-plane.sh" 2>&1 >/dev/null | sed 's/^/    /' >&2
end

# ---- 2. node binaries ------------------------------------------------------------------------
begin "node binaries (kubelet, kubeadm, kube-proxy, coredns, crictl, pause)"
k8s_ldflags=$("$ROOT/hack/k8s-ldflags.sh" "$K8S_VERSION")
module_version() { # module_version <tools module> <module path>
  awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$ROOT/hack/tools/$1/go.mod"
}
CRICTL_VERSION=$(module_version cri-tools sigs.k8s.io/cri-tools)
[[ -n "$CRICTL_VERSION" ]] || die "cannot read the cri-tools version from hack/tools/cri-tools"
gobuild() { # gobuild <name> <module dir> <package> <ldflags>
  local name=$1 dir=$2 pkg=$3 ldflags=$4 t0=$SECONDS
  if [[ -x "$BIN_DIR/$name" ]]; then
    info "$name: cached"
    return
  fi
  info "$name: building $pkg …"
  (cd "$dir" && logged "go-build-$name" env GOWORK=off CGO_ENABLED=0 \
    go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR/.$name.$$.tmp" "$pkg")
  mv "$BIN_DIR/.$name.$$.tmp" "$BIN_DIR/$name"
  info "$name: built in $((SECONDS - t0))s"
}
for cmd in kubelet kubeadm kube-proxy; do
  gobuild "$cmd" "$K8S_MODULE" "k8s.io/kubernetes/cmd/$cmd" "$k8s_ldflags"
done
gobuild coredns "$COREDNS_MODULE" github.com/coredns/coredns "-s -w"
gobuild crictl "$ROOT/hack/tools/cri-tools" sigs.k8s.io/cri-tools/cmd/crictl \
  "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION"
gobuild pause "$ROOT/hack/tools/pause" . "-s -w"
end

# ---- 3. Debian root filesystems --------------------------------------------------------------
begin "Debian $DEBIAN_SUITE root filesystems (mmdebstrap)"
rootfs() { # rootfs <name>: prints the cached tarball built from packages-<name>.txt
  local list hash tar t0=$SECONDS
  list=$(grep -vE '^[[:space:]]*(#|$)' "$RECIPE_DIR/packages-$1.txt" | LC_ALL=C sort | paste -sd, -)
  hash=$(printf '%s\n' "$DEBIAN_SUITE" "${MMDEBSTRAP_OPTS[@]}" "$list" | sha256sum | cut -c1-12)
  tar="$KIND_CACHE/rootfs-$1-$hash.tar"
  if [[ -s "$tar" ]]; then
    info "rootfs $1: cached ($tar)"
    echo "$tar"
    return
  fi
  if ! command -v mmdebstrap >/dev/null; then
    ((EUID == 0)) || die "mmdebstrap is missing: run as root (or apt-get install mmdebstrap)"
    info "installing mmdebstrap …"
    logged apt-get-install sh -c 'apt-get install -y mmdebstrap || { apt-get update && apt-get install -y mmdebstrap; }'
  fi
  ((EUID == 0)) || die "building the rootfs needs root (mmdebstrap --mode=root)"
  info "rootfs $1: mmdebstrap $DEBIAN_SUITE ($list) …"
  logged "mmdebstrap-$1" mmdebstrap "${MMDEBSTRAP_OPTS[@]}" --include="$list" "$DEBIAN_SUITE" "$tar.$$.tmp"
  mv "$tar.$$.tmp" "$tar"
  info "rootfs $1: $(du -h "$tar" | cut -f1) in $((SECONDS - t0))s"
  echo "$tar"
}
ROOTFS_NODE=$(rootfs node)
ROOTFS_KUBE_PROXY=$(rootfs kube-proxy)
TEMP_TAGS+=("$BUILD_REPO:rootfs-node" "$BUILD_REPO:rootfs-kube-proxy")
logged import-node docker import -c 'ENV container=docker' "$ROOTFS_NODE" "$BUILD_REPO:rootfs-node"
logged import-kube-proxy docker import "$ROOTFS_KUBE_PROXY" "$BUILD_REPO:rootfs-kube-proxy"
end

# ---- 4. component images, tagged as kubeadm asks ---------------------------------------------
begin "component images (kubeadm config images list)"
KIND_DIR=$(cd /tmp && GOFLAGS= GOWORK=off go mod download -json "$KIND_MODULE" | jq -r '.Dir // empty')
[[ -d "$KIND_DIR/images/base/files" ]] || die "go mod download $KIND_MODULE: no images/base/files"
SANDBOX_IMAGE=$(sed -n 's/^[[:space:]]*sandbox_image[[:space:]]*=[[:space:]]*"\(.*\)"/\1/p' \
  "$KIND_DIR/images/base/files/etc/containerd/config.toml")
mapfile -t WANTED < <("$BIN_DIR/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null)
((${#WANTED[@]} > 0)) || die "kubeadm config images list printed nothing"
[[ -n "$SANDBOX_IMAGE" ]] && WANTED+=("$SANDBOX_IMAGE")
ctx="$WORK/components"
mkdir -p "$ctx"
for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns pause; do
  ln "$BIN_DIR/$b" "$ctx/$b" 2>/dev/null || cp "$BIN_DIR/$b" "$ctx/$b"
done
declare -A BUILT=() # component -> temporary tag
component() {       # component <name>: builds its image once, prints the temporary tag
  local name=$1 tag="$BUILD_REPO:$1"
  if [[ -z "${BUILT[$name]:-}" ]]; then
    case $name in
    kube-apiserver | kube-controller-manager | kube-scheduler | etcd)
      dbuild "$tag" "$RECIPE_DIR/Dockerfile.binary" "$ctx" --build-arg "BINARY=$name" ;;
    kube-proxy)
      dbuild "$tag" "$RECIPE_DIR/Dockerfile.kube-proxy" "$ctx" --build-arg "ROOTFS_IMAGE=$BUILD_REPO:rootfs-kube-proxy" ;;
    coredns | pause)
      dbuild "$tag" "$RECIPE_DIR/Dockerfile.$name" "$ctx" ;;
    esac
    BUILT[$name]=$tag
  fi
}
for ref in "${WANTED[@]}"; do
  repo=${ref%:*} name=${repo##*/}
  case $name in
  kube-apiserver | kube-controller-manager | kube-scheduler | kube-proxy | etcd | pause) ;;
  coredns)
    [[ "${ref##*:}" == "$COREDNS_VERSION" ]] ||
      die "kubeadm wants $ref but hack/k8s-module.sh --coredns $K8S_VERSION said $COREDNS_VERSION" ;;
  *) die "kubeadm wants $ref, which this recipe does not know how to build" ;;
  esac
  component "$name"
  # tag under the name kubeadm asks for, remembering what that name meant before
  if [[ -z "${RESTORE_TAG[$ref]+set}" ]]; then
    RESTORE_TAG[$ref]=$(docker image inspect --format '{{.Id}}' "$ref" 2>/dev/null || true)
  fi
  docker tag "${BUILT[$name]}" "$ref"
  info "$ref"
done
logged docker-save docker save -o "$WORK/images.tar" "${WANTED[@]}"
info "docker save: $(du -h "$WORK/images.tar" | cut -f1)"
end

# ---- 5. the node image -----------------------------------------------------------------------
begin "node image (kind base files from $KIND_MODULE)"
ctx="$WORK/node"
mkdir -p "$ctx/bin"
cp -r --no-preserve=mode "$KIND_DIR/images/base/files" "$ctx/base"
chmod 0755 "$ctx"/base/usr/local/bin/* "$ctx"/base/kind/bin/*
for b in kubelet kubeadm kubectl crictl; do
  ln "$BIN_DIR/$b" "$ctx/bin/$b" 2>/dev/null || cp "$BIN_DIR/$b" "$ctx/bin/$b"
done
cp "$RECIPE_DIR/10-ptp.conflist" "$RECIPE_DIR/default-storage.yaml" "$ctx/"
echo "$K8S_VERSION" >"$ctx/version"
dbuild "$BUILD_REPO:node" "$RECIPE_DIR/Dockerfile.node" "$ctx" \
  --build-arg "ROOTFS_IMAGE=$BUILD_REPO:rootfs-node" --build-arg "RECIPE=$RECIPE"
end

# ---- 6. preload the component images into the node's containerd ------------------------------
begin "preload images into the node's containerd"
docker run -d --name "$CONTAINER" --entrypoint=sleep "$BUILD_REPO:node" infinity >/dev/null
docker exec -d "$CONTAINER" sh -c 'containerd >/var/log/gauntlet-preload-containerd.log 2>&1'
for i in $(seq 1 60); do
  docker exec "$CONTAINER" ctr version >/dev/null 2>&1 && break
  ((i < 60)) || die "containerd did not start in the preload container"
  sleep 0.5
done
logged ctr-import docker exec -i "$CONTAINER" ctr -n k8s.io images import \
  --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - <"$WORK/images.tar"
docker exec "$CONTAINER" ctr -n k8s.io images ls -q | grep -v -e '^sha256:' -e '^import-' | sed 's/^/    /' >&2
docker exec "$CONTAINER" sh -c 'pkill -x containerd; while pgrep -x containerd >/dev/null; do sleep 0.2; done;
  rm -f /var/log/gauntlet-preload-containerd.log'
logged docker-commit docker commit \
  --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' --change 'CMD []' \
  "$CONTAINER" "$IMAGE"
end

echo "✓ $IMAGE ($(docker image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.2f GB", $1/1e9}')) in $((SECONDS - T_ALL))s" >&2
echo "$IMAGE"
