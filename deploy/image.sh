#!/usr/bin/env bash
# Builds the image ringkv:dev (or $RINGKV_IMAGE) from this checkout with the local Docker
# engine: static kvnode and kvctl compiled here (CGO_ENABLED=0), copied into an image FROM
# scratch (no base image can be pulled), running as user 10001 with its data on a volume.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${RINGKV_IMAGE:-ringkv:dev}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# test/'s buildBins and test.sh's builds use the same flags (CGO_ENABLED=0, -trimpath): keep
# them the same, so that the suite compiles these packages once for all of them.
for cmd in kvnode kvctl; do
  CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags='-s -w' -o "$ctx/$cmd" "./cmd/$cmd"
done
mkdir "$ctx/data"
cp deploy/Dockerfile "$ctx/Dockerfile"
docker build --quiet --tag "$image" --label "org.opencontainers.image.revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$ctx" >/dev/null
echo "built $image"
