#!/usr/bin/env bash
# The whole test suite: format, vet, every package's tests with the race detector (real badger,
# real gRPC/HTTP on loopback, real kvnode processes for the crash and ring-change tests).
# Used by .ci/run. Extra arguments go to every `go test`: ./test.sh -short is the inner loop
# (every package's fast tests, the same real parts; docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" $unformatted >&2
  exit 1
fi
go vet ./...

# The serial tier: tests whose assertion is a rate or a latency, or that keep every core busy
# on purpose, run after the rest, one package at a time, so that nothing else starves them or
# is starved by them. Everything else (the real-process fault tests of ./test included, which
# run side by side within their package) runs first, two packages at a time.
serial_pkgs='/(loadgen|deploy)$'
serial_tests='^(TestRestartedReplicaUsedAtOnce|TestFloodSlowClients|TestMissedUpdatesBusy|TestQuorumWithOneDownBusy|TestNodeAloneBusy|TestGrayNetwork|TestGrayDiskAndFlapping|TestRebalancePredictionHolds)$'
serial_tests_pkgs='./node ./test'
# Under -short (the inner loop) ./node's serial cases all skip and deploy starts no
# container: neither is worth a serial step of its own (a -race link each, one after another).
for a in "$@"; do
  case $a in -short | -short=true | -test.short | -test.short=true)
    serial_pkgs='/loadgen$' serial_tests_pkgs=./test ;;
  esac
done
# The longest packages first, so that they do not start last and run on alone.
first='ringkv/test ringkv/node'
rest=$(go list ./... | grep -Ev "$serial_pkgs" | grep -Ev '^ringkv/(test|node)$')
go test -race -count=1 -timeout 20m -skip "$serial_tests" "$@" $first $rest
go test -race -count=1 -timeout 20m -p 1 -run "$serial_tests" "$@" $serial_tests_pkgs
go test -race -count=1 -timeout 20m -p 1 "$@" $(go list ./... | grep -E "$serial_pkgs")

# deploy/k8s is its own module (so this one does not pull k8s.io/api): its manifest checks.
(cd deploy/k8s && go vet ./... && go test -count=1 "$@" ./...)
