#!/usr/bin/env bash
# The crash loop: imgd killed with SIGKILL at random moments, N times, and nothing lost or
# corrupt at the end. On a journaled ext4 image on a loop device, with nginx on 127.0.0.1
# serving small PNGs (under 64 KiB: written in place), large ones (over 64 KiB: spilled to
# tmp/ and renamed) and failing URLs (404, an HTML page, PNGs cut short), it drops 6 lists
# (10,000 URLs: text, JSON, plist; two share 600 URLs) into the spool of an imgd with a 16 MiB
# disk-limit (eviction all the time) and a 1 s sweep-interval, and kills it N times: right after
# a list is dropped, during start, after some transfers, right after an eviction, during the
# age sweep, while a list finishes, after a random delay; restarting it each time. Then it lets
# imgd finish every list, stops it, and checks: `imgd fsck` finds 0 bad entries; every cached
# file's SHA-256 is the server's; every list is in done/ or failed/ with a report whose counts
# add up (and whose failures are exactly its failing URLs); no URL reported succeeded before a
# kill is reported failed; nothing is left claiming, in the spool or in cache/tmp/.
#
#   bench/crash-loop.sh [--kills N] [--seed S] [--disk-limit SIZE] [--pace R] [--finish-timeout S]
#
# nginx answers at most --pace requests a second (delaying the rest; by default what spreads
# the 10,000 URLs over about 1.5 s a kill) and sends large images at 64 KiB/s × 100 / N after
# their first 64 KiB: transfers are in flight when the kills come, not over after the first few.
#
# Environment: IMGD=/path/to/imgd (a release or debug build; otherwise it builds
# .build/release/imgd), PYTHON (python3). Needs root (mount, nginx) and installs nginx, curl and
# e2fsprogs when missing. Prints the figures; exit status 1 on any violation (each named),
# 2 on bad usage. Work files in bench/work/crash-loop (the daemon's log: imgd.log there).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=crash
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/crash-loop     # git-ignored (bench/work): fs image, mount, nginx, logs
KILLS=100
SEED=
DISK_LIMIT=16MiB
PACE=
FINISH_TIMEOUT=600
MOUNTED=0
IMGD_BIN=""

usage() {
    script_header 24
    cat <<'EOF2'

Options:
  --kills N            SIGKILLs before the last run (default 100; CI runs 10)
  --seed S             the random schedule's seed (default: a new one, printed)
  --disk-limit SIZE    the daemon's disk-limit (default 16MiB: a sixth of what the lists fetch)
  --pace R             requests a second nginx answers, at most (default: 10,000 / (1.5 s × kills), at least 10)
  --finish-timeout S   seconds the last run may take to finish every list (default 600)
EOF2
}

parse_args() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --kills) KILLS=${2:-}; shift ;;
            --seed) SEED=${2:-}; shift ;;
            --disk-limit) DISK_LIMIT=${2:-}; shift ;;
            --pace) PACE=${2:-}; shift ;;
            --finish-timeout) FINISH_TIMEOUT=${2:-}; shift ;;
            -h|--help) usage; exit 0 ;;
            *) usage >&2; log "error: unknown option: $1"; exit 2 ;;
        esac
        shift
    done
    [[ $KILLS =~ ^[1-9][0-9]*$ ]] || { log "error: --kills wants a positive number"; exit 2; }
    [[ -z $SEED || $SEED =~ ^[0-9]+$ ]] || { log "error: --seed wants a number"; exit 2; }
    [[ $FINISH_TIMEOUT =~ ^[1-9][0-9]*$ ]] || { log "error: --finish-timeout wants seconds"; exit 2; }
    [[ -z $PACE || $PACE =~ ^[1-9][0-9]*$ ]] || { log "error: --pace wants requests a second"; exit 2; }
    PACE=${PACE:-$((10000 * 10 / (15 * KILLS)))}
    [[ $PACE -ge 10 ]] || PACE=10
    LARGE_RATE=$((65536 * 100 / KILLS))
    require_root "mount, nginx"
}

main() {
    parse_args "$@"
    mkdir -p "$WORK"
    trap nginx_bench_cleanup EXIT
    trap 'exit 130' INT TERM
    ensure_nginx_bench_packages
    prepare_imgd "$WORK/build.log"
    # The state database, the spool's lists and reports and the 16 MiB cache fit in 128 MiB;
    # the journal (-J size=64 in mount_work_fs) takes another 64.
    mount_work_fs "$WORK" 256M
    local corpus=$WORK/corpus
    PYTHONDONTWRITEBYTECODE=1 "$PYTHON" "$BENCH_DIR/crash_loop.py" corpus --dir "$corpus"
    # In the http block (lib.sh's nginx_start includes it there). limit_req delays requests over
    # the pace (a burst of 64 is queued, never refused: imgd has at most 8 in flight);
    # limit_rate sends its first 64 KiB at once, so only the large images are slowed.
    cat >"$WORK/pace.conf" <<EOF2
limit_req_zone \$server_name zone=crash:1m rate=${PACE}r/s;
limit_req zone=crash burst=64;
map \$uri \$crash_rate { ~^/l/ $LARGE_RATE; default 0; }
limit_rate \$crash_rate;
EOF2
    nginx_start "$WORK/nginx" "$corpus" "$WORK/pace.conf"
    local base=http://127.0.0.1:$NGINX_PORT
    curl -q -sS --fail -o /dev/null "$base/s/00/s00000.png" || die "nginx does not serve $base (see $WORK/nginx/error.log)"
    : >"$WORK/imgd.log"
    log "nginx $(nginx_version) on 127.0.0.1:$NGINX_PORT; imgd: $IMGD_BIN ($(imgd_revision)); $KILLS kills; nginx paced to $PACE requests/s, large images to $LARGE_RATE bytes/s"
    IMGD_BENCH_PIDFILE=$WORK/daemon.pid PYTHONDONTWRITEBYTECODE=1 "$PYTHON" "$BENCH_DIR/crash_loop.py" run \
        --imgd "$IMGD_BIN" --data "$WORK/mnt" --corpus "$corpus" --base-url "$base" \
        --lists-dir "$WORK/lists" --daemon-log "$WORK/imgd.log" --kills "$KILLS" ${SEED:+--seed "$SEED"} \
        --disk-limit "$DISK_LIMIT" --finish-timeout "$FINISH_TIMEOUT"
}

main "$@"
