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
REPO_DIR=$(dirname "$BENCH_DIR")
WORK=$BENCH_DIR/work/ready      # git-ignored (bench/work): fs image, mount point, logs
PYTHON=${PYTHON:-python3}
ENTRIES=1000000
RUNS=5
USE_LOOP=1
COLD=1
MOUNTED=0
ORIG_ARGS="$*"

log() { printf '[ready %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
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
    [[ $EUID -eq 0 ]] || die "run as root (mount, drop_caches)"
}

# Stops a daemon the Python driver left behind (it writes its pid here), then unmounts.
cleanup() {
    local status=$?
    if [[ -s $WORK/daemon.pid ]]; then
        local pid
        pid=$(cat "$WORK/daemon.pid")
        if [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$(readlink -f "$IMGD_BIN")" ]]; then
            log "stopping imgd (pid $pid)"
            kill -TERM "$pid" 2>/dev/null || true
        fi
        rm -f "$WORK/daemon.pid"
    fi
    if [[ $MOUNTED -eq 1 ]]; then
        umount "$WORK/mnt" 2>/dev/null || umount -l "$WORK/mnt" || true
        rm -f "$WORK/fs.img"
    fi
    exit "$status"
}

# The index, the cache and the state live on a fresh journaled ext4 image on a loop device,
# like the prefetch benchmark's downloads (/ here is ext4 without a journal).
setup_work_area() {
    mkdir -p "$WORK/mnt"
    if [[ $USE_LOOP -eq 1 ]]; then
        mountpoint -q "$WORK/mnt" && umount "$WORK/mnt"
        rm -f "$WORK/fs.img"
        # The index is ~200 MiB per million entries (the pristine copy stays in bench/work/ready
        # on /, kept between invocations); the run's copy and its WAL go here.
        local size_mib=$(( ENTRIES / 1000000 * 400 + 512 ))
        truncate -s "${size_mib}M" "$WORK/fs.img"
        mkfs.ext4 -q -F -J size=64 -E lazy_itable_init=0,lazy_journal_init=0 "$WORK/fs.img"
        mount -o loop "$WORK/fs.img" "$WORK/mnt" || die "mount -o loop failed; try --no-loop"
        MOUNTED=1
        DATA=$WORK/mnt
        FS_DESC="${size_mib} MiB image on a loop device: $(findmnt -n -o FSTYPE,SOURCE -T "$DATA" | head -1 | tr -s ' ' ' ')"
        if dumpe2fs -h "$(findmnt -n -o SOURCE -T "$DATA" | head -1)" 2>/dev/null | grep -q has_journal; then
            FS_DESC+=", with a journal"
        fi
    else
        DATA=$WORK/data
        mkdir -p "$DATA"
        FS_DESC="$(findmnt -n -o FSTYPE,SOURCE -T "$DATA" | head -1) (--no-loop)"
    fi
    log "work area: $DATA — $FS_DESC"
}

prepare_imgd() {
    IMGD_BIN=${IMGD:-}
    if [[ -z $IMGD_BIN ]]; then
        IMGD_BIN=$REPO_DIR/.build/release/imgd
        log "building imgd: swift build -c release --product imgd (log: $WORK/build.log)"
        (cd "$REPO_DIR" && swift build -c release --product imgd) >"$WORK/build.log" 2>&1 \
            || die "the release build failed (see $WORK/build.log)"
    fi
    [[ -x $IMGD_BIN ]] || die "no executable imgd at $IMGD_BIN"
    IMGD_BIN=$(readlink -f "$IMGD_BIN")
}

main() {
    parse_args "$@"
    mkdir -p "$WORK"
    IMGD_BIN=""
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 missing (apt-get install e2fsprogs)"
    prepare_imgd
    setup_work_area
    local cold=()
    [[ $COLD -eq 1 ]] || cold=(--no-cold)
    log "imgd: $IMGD_BIN; $ENTRIES entries, $RUNS runs per variant"
    IMGD_BENCH_PIDFILE=$WORK/daemon.pid "$PYTHON" "$BENCH_DIR/ready_bench.py" --imgd "$IMGD_BIN" \
        --work "$DATA" --keep-dir "$WORK" --entries "$ENTRIES" --runs "$RUNS" "${cold[@]}" --fs "$FS_DESC" \
        --results "$BENCH_DIR/RESULTS.md" --command "bench/ready-bench.sh${ORIG_ARGS:+ $ORIG_ARGS}"
}

main "$@"
