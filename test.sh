#!/usr/bin/env bash
# The whole test suite: format, vet, every package's tests (real badger, real gRPC/HTTP on
# loopback, real kvnode processes for the crash and ring-change tests), with the race detector
# wherever our code runs in the test process. Used by .ci/run. Extra arguments go to every
# `go test`: ./test.sh -short is the inner loop (every package's fast tests, the same real
# parts, without the race detector unless RACE=1; docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" $unformatted >&2
  exit 1
fi

logs=$(mktemp -d)
# On an early exit, what runs in the background ends first (its kvnode processes with it).
trap 'wait; rm -rf "$logs"' EXIT

# Each tier's start, in seconds since the suite began, on stderr (docs/testing.md's times),
# with the CPU seconds the whole machine has spent since (user, nice and system, /proc/stat).
cpu() { [ -r /proc/stat ] && awk '/^cpu /{print int(($2+$3+$4)/100); exit}' /proc/stat || echo 0; }
cpu0=$(cpu)
tier() { echo "test.sh: $* at ${SECONDS}s, $(($(cpu) - cpu0)) s of CPU" >&2; }
# Every build but the race detector's with the flags deploy/image.sh builds the image with
# (static: no cgo; -trimpath): vet, ./test, the kvnode and kvctl that ./test builds (it passes
# its environment on) and deploy's image then share one compile of each package, and the race
# detector's (it needs cgo) is the only other. Cold, one such compile took 190 s of CPU.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
static() { CGO_ENABLED=0 "$@"; }
tier vet
static go vet ./...

# The serial tier: tests whose assertion is a rate or a latency, or that keep every core busy
# on purpose, run after the rest, one package at a time, so that nothing else starves them or
# is starved by them. The gray drills (a latency each, but mostly waiting on fault windows)
# then run beside deploy's compose clusters (which mostly wait on containers).
serial_tests='TestRestartedReplicaUsedAtOnce|TestFloodSlowClients|TestMissedUpdatesBusy|TestQuorumWithOneDownBusy|TestNodeAloneBusy|TestRebalancePredictionHolds'
gray_tests='TestGrayNetwork|TestGrayCuts'
# The slow-disk drill runs alone, after deploy: beside it, the host disk's writes (image
# builds, containers) made its node's fsyncs late before any fault.
disk_tests='TestGrayDiskAndFlapping'
# ./test drives kvnode and kvctl processes, which are built without -race: the detector there
# instruments the harness alone, at 2.7x the CPU of a case (TestRingAddThenDrainUnderLoad:
# 220 s of CPU with it, 82 s without). ./test runs without it but for the cases that run our
# code in the test process (the console on a live cluster, TestTUI*) and one that drives the
# harness's concurrent load, traffic and read-back (TestRepairUnderLoad).
race_tests='TestTUI[A-Za-z]*|TestRepairUnderLoad'
short=
# Under -short (the inner loop) ./node's serial cases all skip, deploy starts no container and
# the gray drills skip: deploy runs in the first tier and ./node gets no serial step.
for a in "$@"; do
  case $a in -short | -short=true | -test.short | -test.short=true) short=1 ;; esac
done
# The race detector: every run but the inner loop's. Under -short every package runs static,
# as vet was built: no package compiles twice and no test binary links with the detector
# (one link of each of ~45 test binaries, and cases 2-10x slower); RACE=1 keeps it.
race=(go test -race)
# ./test's race cases run apart, after the rest, only with the detector; else in ./test's run.
apart="|$race_tests"
if [ -n "$short" ] && [ -z "${RACE:-}" ]; then
  race=(static go test)
  apart=
fi

# The first tier, everything but the serial tests, side by side: ./test without -race in the
# background (its output follows when it ends), every other package with it, two at a time,
# ./node first so that the longest starts first.
late='^ringkv/(test|node|loadgen|deploy)$'
[ -z "$short" ] || late='^ringkv/(test|node|loadgen)$'
rest=$(go list ./... | grep -Ev "$late")
tier "first tier"
static go test -count=1 -timeout 20m -skip "^($serial_tests|$gray_tests|$disk_tests$apart)\$" "$@" ./test >"$logs/test" 2>&1 &
tests=$!
rc=0
"${race[@]}" -count=1 -timeout 20m -skip "^($serial_tests|$gray_tests|$disk_tests)\$" "$@" ./node $rest || rc=1
if [ -n "$apart" ]; then
  tier "./test's race cases"
  "${race[@]}" -count=1 -timeout 20m -run "^($race_tests)\$" "$@" ./test || rc=1
fi
tier "waiting for ./test"
wait $tests || rc=1
cat "$logs/test"
[ $rc = 0 ] || exit 1

tier "serial tier"
[ -n "$short" ] || go test -race -count=1 -timeout 20m -run "^($serial_tests)\$" "$@" ./node
static go test -count=1 -timeout 20m -run "^($serial_tests)\$" "$@" ./test
"${race[@]}" -count=1 -timeout 20m "$@" ./loadgen
# deploy/k8s is its own module (so this one does not pull k8s.io/api): its manifest checks,
# in the background from here on, where the machine mostly waits (downloading and compiling
# k8s.io's modules took 40 s after the rest).
(cd deploy/k8s && go vet ./... && go test -count=1 "$@" ./...) >"$logs/k8s" 2>&1 &
k8s=$!
if [ -z "$short" ]; then
  tier "gray drills beside deploy"
  static go test -count=1 -timeout 20m -run "^($gray_tests)\$" "$@" ./test >"$logs/gray" 2>&1 &
  gray=$!
  go test -race -count=1 -timeout 20m "$@" ./deploy || rc=1
  wait $gray || rc=1
  cat "$logs/gray"
  tier "the slow-disk drill"
  static go test -count=1 -timeout 20m -run "^($disk_tests)\$" "$@" ./test || rc=1
fi

tier "waiting for deploy/k8s"
wait $k8s || rc=1
cat "$logs/k8s"
tier "end, rc=$rc"
exit $rc
