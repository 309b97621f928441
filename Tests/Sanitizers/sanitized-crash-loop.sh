#!/usr/bin/env bash
# CI's short run of make test-tsan and make test-asan. Building the whole suite with a sanitizer
# takes longer than CI's budget allows (see docs/development.md, "Proofs under faults"), so this builds the
# imgd binary alone with the sanitizer (into the same .build-tsan or .build-asan folder the full
# runs use) and runs the crash loop against it: claims, transfers, index batches, eviction under
# a small disk-limit, the age sweep and restarts, on the daemon's real threads. Any report the
# sanitized daemon (or the imgd fsck the loop runs at the end) writes fails it, as does any
# violation the crash loop finds.
#
# Usage: sanitized-crash-loop.sh thread|address [crash-loop arguments; default --kills 5]
# Needs root, as the crash loop does (a loop mount, nginx).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
kind=${1:?usage: sanitized-crash-loop.sh thread|address [crash-loop arguments]}
shift
# shellcheck source=common.sh
source Tests/Sanitizers/common.sh
short=$(sanitizer_short "$kind") || exit 2
[ $# -gt 0 ] || set -- --kills 5
SCRATCH=${SANITIZER_SCRATCH:-.build-$short}
REPORTS=$REPO/$SCRATCH/sanitizer-reports-crash-loop
start=$(date +%s)

echo "crash-loop-$short: building imgd with -sanitize=$kind into $SCRATCH"
mkdir -p "$SCRATCH"
if ! swift build --product imgd --sanitize="$kind" --scratch-path "$SCRATCH" >"$SCRATCH/build-imgd.log" 2>&1; then
    tail -40 "$SCRATCH/build-imgd.log"
    echo "crash-loop-$short: the build failed (log: $SCRATCH/build-imgd.log)"
    exit 1
fi
built=$(date +%s)
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
export_sanitizer_options "$kind" "$REPORTS" "$REPO"

IMGD=$(swift build --sanitize="$kind" --scratch-path "$SCRATCH" --show-bin-path)/imgd bench/crash-loop.sh "$@"
status=$?
end=$(date +%s)

report_findings "crash-loop-$short" "$REPORTS" || status=1
echo "crash-loop-$short: build $((built - start)) s, crash loop $((end - built)) s, status $status"
exit "$status"
