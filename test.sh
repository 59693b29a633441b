#!/usr/bin/env bash
# The whole test suite: format, vet, every package's tests with the race detector (real badger,
# real gRPC/HTTP on loopback, real kvnode processes for the crash and ring-change tests).
# Used by .ci/run. Extra arguments go to every `go test` (e.g. ./test.sh -short).
set -euo pipefail
cd "$(dirname "$0")"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" $unformatted >&2
  exit 1
fi
go vet ./...

# Timing-sensitive packages (the load generator's rate and coordinated-omission tests, and the
# real-process fault tests) run on their own after the rest, so a parallel -race build of
# another package does not starve them.
serial='/(loadgen|test|deploy)$'
go test -race -count=1 -timeout 20m "$@" $(go list ./... | grep -Ev "$serial")
go test -race -count=1 -timeout 20m -p 1 "$@" $(go list ./... | grep -E "$serial")

# deploy/k8s is its own module (so this one does not pull k8s.io/api): its manifest checks.
(cd deploy/k8s && go vet ./... && go test -count=1 "$@" ./...)
