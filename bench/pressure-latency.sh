#!/usr/bin/env bash
# Memory pressure latency of the real daemon: a byte written to its MEMORY_PRESSURE_WATCH FIFO
# to the `memory_pressure` event on the control socket (median, p90, p99, max of N events).
# The unit and integration tests assert that the purge comes after the write and before the
# event is reported; how long that takes is measured here.
#
#   bench/pressure-latency.sh [--events N]
#
# Environment: IMGD=/path/to/imgd (otherwise it builds .build/release/imgd), PYTHON (python3).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=pressure
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/pressure      # git-ignored (bench/work)

mkdir -p "$WORK"
prepare_imgd "$WORK/build.log"
rm -rf "$WORK/daemon"
"${PYTHON:-python3}" "$BENCH_DIR/pressure_latency.py" --imgd "$IMGD_BIN" --work "$WORK/daemon" "$@"
