#!/usr/bin/env bash
# Builds the image ringkv-prometheus:dev (or $RINGKV_PROMETHEUS_IMAGE) for the compose
# cluster's monitoring profile: the host's Prometheus binary (Debian's `prometheus` package:
# apt-get install prometheus) and the shared libraries it links (ldd), copied into an image
# FROM scratch, as deploy/image.sh builds ringkv:dev: no base image can be pulled.
set -euo pipefail
cd "$(dirname "$0")"
image=${RINGKV_PROMETHEUS_IMAGE:-ringkv-prometheus:dev}
bin=$(command -v prometheus || true)
if [[ -z $bin ]]; then
  echo "image.sh: no prometheus binary on this host: apt-get install prometheus" >&2
  exit 1
fi
bin=$(readlink -f "$bin")
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/root/bin" "$ctx/prometheus"
cp "$bin" "$ctx/root/bin/prometheus"
# The libraries at the paths the binary looks for them (the loader's own absolute path too).
for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
  mkdir -p "$ctx/root$(dirname "$lib")"
  cp -L "$lib" "$ctx/root$lib"
done
cp Dockerfile "$ctx/Dockerfile"
docker build --quiet --tag "$image" --label "org.opencontainers.image.version=$("$bin" --version 2>&1 | head -1)" "$ctx" >/dev/null
echo "built $image"
