#!/usr/bin/env bash
# Start benchmark: what a fresh process costs. One cached image written to a file by
# `imgctl get --no-fetch -o F` against a running daemon, beside `curl -o F` fetching the same
# image from nginx on 127.0.0.1; `imgctl --help` beside `curl --version`; `imgd prefetch` of an
# empty list on an existing cache. Interleaved pairs; wall, CPU and peak RSS of each process.
# Writes its section of bench/RESULTS.md. See bench/README.md, "Start benchmark".
#
#   bench/start-bench.sh [--quick] [--runs R] [--base DIR] [--no-loop]
#
# Environment: IMGD=/path/to/imgd and IMGCTL=/path/to/imgctl (otherwise both are built with
# `swift build -c release`), SCRATCH (SwiftPM's --scratch-path, default .build).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=start-bench
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/start      # git-ignored (bench/work): image, nginx, daemon, outputs
SCRATCH=${SCRATCH:-$REPO_DIR/.build}
RUNS=20
BASE=""
USE_LOOP=1
MOUNTED=0
ORIG_ARGS="$*"

usage() {
    script_header 11
    cat <<'EOF'

Options:
  --quick        5 pairs per row (smoke test)
  --runs R       interleaved pairs per row (default 20; the table shows medians)
  --base DIR     also time the imgd and imgctl in DIR (another build, e.g. the last commit's)
                 against these, pair by pair
  --no-loop      work in bench/work/start on / instead of a journaled ext4 image on a loop device
EOF
}

parse_args() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --quick) RUNS=5 ;;
            --runs) RUNS=$2; shift ;;
            --base) BASE=$2; shift ;;
            --no-loop) USE_LOOP=0 ;;
            -h|--help) usage; exit 0 ;;
            *) usage >&2; die "unknown option: $1" ;;
        esac
        shift
    done
    [[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs wants a positive whole number"
    [[ -z $BASE || ( -x $BASE/imgd && -x $BASE/imgctl ) ]] || die "--base $BASE holds no executable imgd and imgctl"
    require_root "apt-get, mount, nginx"
}

# Builds what IMGD / IMGCTL do not name (release).
build() {
    local products=() bin_dir=""
    [[ -z ${IMGD:-} ]] && products+=(imgd)
    [[ -z ${IMGCTL:-} ]] && products+=(imgctl)
    if [[ ${#products[@]} -gt 0 ]]; then
        log "building ${products[*]}: swift build -c release --scratch-path $SCRATCH (log: $WORK/build.log)"
        release_build "$WORK/build.log" "$SCRATCH" "${products[@]}" \
            || die "the release build of $BUILD_PRODUCT failed (see $WORK/build.log)"
        bin_dir=$(cd "$REPO_DIR" && swift build -c release --scratch-path "$SCRATCH" --show-bin-path)
    fi
    IMGD_BIN=$(readlink -f "${IMGD:-$bin_dir/imgd}")
    IMGCTL_BIN=$(readlink -f "${IMGCTL:-$bin_dir/imgctl}")
    [[ -x $IMGD_BIN && -x $IMGCTL_BIN ]] || die "no executable at $IMGD_BIN or $IMGCTL_BIN"
}

main() {
    parse_args "$@"
    mkdir -p "$WORK"
    IMGD_BIN=""
    trap nginx_bench_cleanup EXIT
    trap 'exit 130' INT TERM
    ensure_nginx_bench_packages
    build
    setup_data_area 256
    # One small PNG of the prefetch benchmark's corpus (~16 KB), served by nginx.
    local corpus=$WORK/corpus url
    "$PYTHON" "$BENCH_DIR/gen_corpus.py" generate --dir "$corpus" --small 1 --large 0 >&2
    nginx_start "$WORK/nginx" "$corpus"
    url="http://127.0.0.1:$NGINX_PORT/$(cd "$corpus" && find s -name '*.png' | head -1)"
    curl -q -sS --fail -o /dev/null "$url" || die "nginx does not serve $url (see $WORK/nginx/error.log)"
    log "imgd: $IMGD_BIN, imgctl: $IMGCTL_BIN; image $url; $RUNS pairs per row"
    local base=() floor=()
    [[ -z $BASE ]] || base=(--base "$(readlink -f "$BASE")")
    # The floor of an empty prefetch: bench/floor/start_floor.c, C against the same libraries.
    command -v cc >/dev/null || apt_install "$WORK/apt.log" gcc
    if cc -O2 -o "$WORK/start-floor" "$BENCH_DIR/floor/start_floor.c" -lcurl -lcrypto -lsqlite3 2>"$WORK/floor-build.log"; then
        floor=(--floor "$WORK/start-floor")
    else
        log "bench/floor/start_floor.c did not build (see $WORK/floor-build.log): no floor row"
    fi
    IMGD_BENCH_PIDFILE=$WORK/daemon.pid "$PYTHON" "$BENCH_DIR/start_bench.py" --imgd "$IMGD_BIN" \
        --imgctl "$IMGCTL_BIN" "${base[@]}" "${floor[@]}" --url "$url" --work "$DATA" --runs "$RUNS" --fs "$FS_DESC" \
        --results "$BENCH_DIR/RESULTS.md" --command "bench/start-bench.sh${ORIG_ARGS:+ $ORIG_ARGS}"
}

main "$@"
