#!/usr/bin/env bash
# The whole performance suite, one command: every benchmark in sequence, each writing its own
# section of bench/RESULTS.md, then a summary section of what ran and how it ended.
#
#   bench/run-all.sh [--quick] [--only NAME,...]
#
#   prefetch  bench/prefetch-bench.sh --caps 16,64      (--quick: --quick)
#   https     bench/prefetch-bench.sh --schemes http,https --sets small --tools imgd,imgd-daemon,curl,wget2
#                                                       (--quick: the same with --quick)
#   lookup    bench/lookup-bench.sh                     (when present and executable)
#   ready     bench/ready-bench.sh                      (--quick: --quick)
#   memory    bench/memory-bench.sh                     (--quick: --quick)
#   index     bench/index-bench.sh                      (--quick: --entries 100000)
#   start     bench/start-bench.sh                      (--quick: --quick)
#
# Environment: IMGD, IMGCTL (binaries to use; otherwise built once here with
# `swift build -c release` into .build), PYTHON. Runs as root. Exit status 1 when any failed.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=run-all
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
QUICK=0
ONLY=prefetch,https,lookup,ready,memory,index,start
LOGS=$BENCH_DIR/work/run-all
ORIG_ARGS="$*"
STEP_PID=""

usage() { script_header 17; }

while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) QUICK=1 ;;
        --only) ONLY=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown option: $1" ;;
    esac
    shift
done
[[ $ONLY =~ ^(prefetch|https|lookup|ready|memory|index|start)(,(prefetch|https|lookup|ready|memory|index|start))*$ ]] \
    || die "--only wants names among prefetch,https,lookup,ready,memory,index,start"
require_root "apt-get, mount, nginx, drop_caches"
mkdir -p "$LOGS"

# A step still running when we are interrupted gets SIGTERM; its own trap cleans up.
on_exit() {
    local status=$?
    if [[ -n $STEP_PID ]] && kill -0 "$STEP_PID" 2>/dev/null; then
        kill -TERM "$STEP_PID" 2>/dev/null || true
        wait "$STEP_PID" 2>/dev/null || true
    fi
    exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

wanted() { [[ ,$ONLY, == *,$1,* ]]; }

# One release build for every step (they would otherwise each check the build).
if [[ -z ${IMGD:-} ]]; then
    log "building imgd and imgctl: swift build -c release (log: $LOGS/build.log)"
    release_build "$LOGS/build.log" "$REPO_DIR/.build" imgd imgctl \
        || die "the release build failed (see $LOGS/build.log)"
    IMGD=$REPO_DIR/.build/release/imgd
    IMGCTL=${IMGCTL:-$REPO_DIR/.build/release/imgctl}
fi
export IMGD PYTHON
[[ -n ${IMGCTL:-} ]] && export IMGCTL

SUMMARY=()
FAILED=0
# Runs one step with its output on the terminal and in bench/work/run-all/NAME.log.
step() {
    local name=$1; shift
    local start rc=0
    log "── $name: $*"
    start=$(date +%s)
    "$@" > >(tee "$LOGS/$name.log") 2>&1 &
    STEP_PID=$!
    wait "$STEP_PID" || rc=$?
    STEP_PID=""
    local took=$(( $(date +%s) - start ))
    log "── $name: exit status $rc after ${took} s"
    SUMMARY+=("| $name | \`${*#"$BENCH_DIR"/}\` | $([[ $rc -eq 0 ]] && echo ok || echo "**exit $rc**") | $took s |")
    [[ $rc -eq 0 ]] || FAILED=1
}

quick=()
[[ $QUICK -eq 1 ]] && quick=(--quick)
START_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')

if wanted prefetch; then
    if [[ $QUICK -eq 1 ]]; then step prefetch "$BENCH_DIR/prefetch-bench.sh" --quick
    else step prefetch "$BENCH_DIR/prefetch-bench.sh" --caps 16,64; fi
fi
# The same prefetch runs over https + HTTP/2 beside plain http (its own RESULTS.md section,
# prefetch-https). aria2c is left out: it has no HTTP/2, and the prefetch step times it over http.
if wanted https; then
    step https "$BENCH_DIR/prefetch-bench.sh" --schemes http,https --sets small \
        --tools imgd,imgd-daemon,curl,wget2 "${quick[@]}"
fi
if wanted lookup; then
    if [[ -x $BENCH_DIR/lookup-bench.sh ]]; then
        lookup_args=()
        if [[ $QUICK -eq 1 ]] && "$BENCH_DIR/lookup-bench.sh" --help 2>&1 | grep -q -- --quick; then
            lookup_args=(--quick)
        fi
        step lookup "$BENCH_DIR/lookup-bench.sh" "${lookup_args[@]}"
    else
        log "── lookup: bench/lookup-bench.sh is missing or not executable: skipped"
        SUMMARY+=("| lookup | \`lookup-bench.sh\` | skipped (missing or not executable) | |")
    fi
fi
wanted ready && step ready "$BENCH_DIR/ready-bench.sh" "${quick[@]}"
wanted memory && step memory "$BENCH_DIR/memory-bench.sh" "${quick[@]}"
if wanted index; then
    if [[ $QUICK -eq 1 ]]; then step index "$BENCH_DIR/index-bench.sh" --entries 100000
    else step index "$BENCH_DIR/index-bench.sh"; fi
fi
wanted start && step start "$BENCH_DIR/start-bench.sh" "${quick[@]}"

body=$(
    echo "## Suite run"
    echo
    echo "Started $START_DATE with \`bench/run-all.sh${ORIG_ARGS:+ $ORIG_ARGS}\`$([[ $QUICK -eq 1 ]] && echo ' (**quick: smoke sizes, not for conclusions**)'); imgd \`$IMGD\`."
    echo "Each step wrote its own section below; its full output is in \`bench/work/run-all/NAME.log\`."
    echo
    echo "| step | command | result | took |"
    echo "|---|---|---|---|"
    printf '%s\n' "${SUMMARY[@]}"
)
write_results_section run-all bench/run-all.sh "$body" --first
log "wrote bench/RESULTS.md"
printf '%s\n' "${SUMMARY[@]}" >&2
exit "$FAILED"
