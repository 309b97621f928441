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

swift test --skip-build --sanitize="$kind" --scratch-path "$SCRATCH" \
    --experimental-maximum-parallelization-width "$WIDTH" "$@" 2>&1 | tee "$SCRATCH/test.log" | tail -25
status=${PIPESTATUS[0]}
end=$(date +%s)

report_findings "test-$short" "$REPORTS" || status=1
echo "test-$short: build $((built - start)) s, tests $((end - built)) s, status $status (log: $SCRATCH/test.log)"
exit "$status"
