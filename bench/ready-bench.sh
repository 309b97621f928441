#!/usr/bin/env bash
# Start-up to READY with a large cache index: makes an index of N synthetic entries (default
# 1,000,000), starts the real `imgd` daemon on it with NOTIFY_SOCKET pointing at a datagram
# socket this benchmark binds, and times exec → READY=1 (median of R runs), beside an empty
# cache and, after dropping the page cache, a cold start. Reports the index file's size.
#
#   bench/ready-bench.sh [--quick] [--entries N] [--runs R] [--no-loop] [--no-cold]
#
# Environment: IMGD=/path/to/imgd (otherwise it builds .build/release/imgd), PYTHON (python3).
# Writes its section of bench/RESULTS.md (between the ready-bench marker comments).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=ready
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/ready      # git-ignored (bench/work): fs image, mount point, logs
ENTRIES=1000000
RUNS=5
USE_LOOP=1
COLD=1
MOUNTED=0
ORIG_ARGS="$*"

usage() {
    script_header 10
    cat <<'EOF'

Options:
  --quick        100,000 entries, 3 runs (smoke test)
  --entries N    entries in the index (default 1000000)
  --runs R       runs of each variant, interleaved (default 5)
  --no-loop      work in bench/work/ready on / instead of a journaled ext4 image on a loop device
  --no-cold      skip the variant that drops the page cache first
EOF
}

parse_args() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --quick) ENTRIES=100000; RUNS=3 ;;
            --entries) ENTRIES=$2; shift ;;
            --runs) RUNS=$2; shift ;;
            --no-loop) USE_LOOP=0 ;;
            --no-cold) COLD=0 ;;
            -h|--help) usage; exit 0 ;;
            *) usage >&2; die "unknown option: $1" ;;
        esac
        shift
    done
    [[ $ENTRIES =~ ^[1-9][0-9]*$ && $RUNS =~ ^[1-9][0-9]*$ ]] || die "--entries and --runs want positive numbers"
    require_root "mount, drop_caches"
}

# At exit: a daemon the Python driver left behind (it writes its pid there), the loop mount.
cleanup() {
    local status=$?
    stop_pidfile_daemon "$WORK/daemon.pid"
    unmount_work_fs "$WORK"
    exit "$status"
}

main() {
    parse_args "$@"
    mkdir -p "$WORK"
    IMGD_BIN=""
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 missing (apt-get install e2fsprogs)"
    prepare_imgd "$WORK/build.log"
    # The index is ~200 MiB per million entries (the pristine copy stays in bench/work/ready
    # on /, kept between invocations); the run's copy and its WAL go on the image.
    setup_data_area $(( ENTRIES / 1000000 * 400 + 512 ))
    local cold=()
    [[ $COLD -eq 1 ]] || cold=(--no-cold)
    log "imgd: $IMGD_BIN; $ENTRIES entries, $RUNS runs per variant"
    IMGD_BENCH_PIDFILE=$WORK/daemon.pid "$PYTHON" "$BENCH_DIR/ready_bench.py" --imgd "$IMGD_BIN" \
        --work "$DATA" --keep-dir "$WORK" --entries "$ENTRIES" --runs "$RUNS" "${cold[@]}" --fs "$FS_DESC" \
        --results "$BENCH_DIR/RESULTS.md" --command "bench/ready-bench.sh${ORIG_ARGS:+ $ORIG_ARGS}"
}

main "$@"
