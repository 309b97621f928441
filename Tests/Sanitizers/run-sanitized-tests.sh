#!/usr/bin/env bash
# make test-tsan / make test-asan: builds the whole suite with a sanitizer (into .build-tsan or
# .build-asan; the imgd and imgctl the integration tests start are built with it too) and runs
# it. The sanitizer writes each report to a file under <build folder>/sanitizer-reports/ (the
# environment is inherited by every child the tests start, so a daemon's report lands there as
# well); the run fails when the suite fails or when any report was written.
#
# Usage: run-sanitized-tests.sh thread|address [swift test arguments, e.g. --filter Suite]
# Environment: TEST_WIDTH (tests at once, default 8), SANITIZER_SCRATCH (build folder).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
kind=${1:?usage: run-sanitized-tests.sh thread|address [swift test arguments]}
shift
case $kind in
thread) short=tsan ;;
address) short=asan ;;
*) echo "unknown sanitizer: $kind (thread or address)"; exit 2 ;;
esac
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

# Suppressions, each with the proof that its report is false, live in Tests/Sanitizers/.
case $kind in
thread)
    export TSAN_OPTIONS="log_path=$REPORTS/tsan second_deadlock_stack=1 suppressions=$REPO/Tests/Sanitizers/tsan.supp ${TSAN_OPTIONS:-}"
    ;;
address)
    # Leak checking stays off for the suite: the test runner keeps what it allocates for
    # every test until it exits (the fuzz targets run with leak checking on: make fuzz).
    export ASAN_OPTIONS="log_path=$REPORTS/asan detect_leaks=0 ${ASAN_OPTIONS:-}"
    ;;
esac
# A crash must end the process at once, not wait for Swift's interactive backtracer.
export SWIFT_BACKTRACE=enable=no

swift test --skip-build --sanitize="$kind" --scratch-path "$SCRATCH" \
    --experimental-maximum-parallelization-width "$WIDTH" "$@" 2>&1 | tee "$SCRATCH/test.log" | tail -25
status=${PIPESTATUS[0]}
end=$(date +%s)

reports=$(find "$REPORTS" -type f | sort)
if [ -n "$reports" ]; then
    echo "test-$short: $(echo "$reports" | wc -l) sanitizer report file(s):"
    for report in $reports; do
        echo "== $report"
        grep -E '^(WARNING|ERROR|SUMMARY): ' "$report" | sort | uniq -c | head -20
    done
    status=1
fi
echo "test-$short: build $((built - start)) s, tests $((end - built)) s, status $status (log: $SCRATCH/test.log)"
exit "$status"
