#!/usr/bin/env bash
# make test-tsan / make test-asan: builds the whole suite with a sanitizer (into .build-tsan or
# .build-asan; the imgd and imgctl the integration tests start are built with it too) and runs
# it. The sanitizer writes each report to a file under <build folder>/sanitizer-reports/ (the
# environment is inherited by every child the tests start, so a daemon's report lands there as
# well); the run fails when the suite fails or when any report was written.
#
# Usage: run-sanitized-tests.sh thread|address [swift test arguments, e.g. --filter Suite]
# Environment: TEST_WIDTH (tests at once, default 8), SANITIZER_SCRATCH (build folder),
# TIMED_SUITES (given by make: with no arguments, those suites run after the rest, as in make test).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
kind=${1:?usage: run-sanitized-tests.sh thread|address [swift test arguments]}
shift
# shellcheck source=common.sh
source Tests/Sanitizers/common.sh
short=$(sanitizer_short "$kind") || exit 2
SCRATCH=${SANITIZER_SCRATCH:-.build-$short}
REPORTS=$REPO/$SCRATCH/sanitizer-reports
WIDTH=${TEST_WIDTH:-8}
start=$(date +%s)

echo "test-$short: building the suite with -sanitize=$kind into $SCRATCH"
mkdir -p "$SCRATCH"
if ! swift build --build-tests --sanitize="$kind" --scratch-path "$SCRATCH" >"$SCRATCH/build.log" 2>&1; then
    tail -40 "$SCRATCH/build.log"
    echo "test-$short: the build failed (log: $SCRATCH/build.log)"
    exit 1
fi
built=$(date +%s)
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
export_sanitizer_options "$kind" "$REPORTS" "$REPO"

# One run of the suite (or part of it), appended to the log.
run_tests() {
    swift test --skip-build --sanitize="$kind" --scratch-path "$SCRATCH" "$@" 2>&1 | tee -a "$SCRATCH/test.log" | tail -25
    return "${PIPESTATUS[0]}"
}
: >"$SCRATCH/test.log"
if [ $# -eq 0 ] && [ -n "${TIMED_SUITES:-}" ]; then
    # The whole suite as make test runs it: the suites that bound a time from both sides after
    # the rest, two tests at a time (Makefile, TIMED_SUITES).
    run_tests --skip "$TIMED_SUITES" --experimental-maximum-parallelization-width "$WIDTH"
    status=$?
    run_tests --filter "$TIMED_SUITES" --experimental-maximum-parallelization-width 2 || status=1
else
    run_tests --experimental-maximum-parallelization-width "$WIDTH" "$@"
    status=$?
fi
end=$(date +%s)

report_findings "test-$short" "$REPORTS" || status=1
echo "test-$short: build $((built - start)) s, tests $((end - built)) s, status $status (log: $SCRATCH/test.log)"
exit "$status"
