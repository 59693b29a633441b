#!/usr/bin/env bash
# The whole test suite: format, vet, every package's tests with the race detector (real badger,
# real gRPC/HTTP on loopback, real kvnode processes for the crash tests). Used by .ci/run.
set -euo pipefail
cd "$(dirname "$0")"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" $unformatted >&2
  exit 1
fi
go vet ./...
go test -race -count=1 -timeout 20m "$@" ./...
