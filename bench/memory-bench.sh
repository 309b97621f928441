#!/usr/bin/env bash
# imgd's memory: (a) RSS of the daemon while it warms 100,000 URLs from a local nginx,
# (b) RSS growth while it claims a 1,000,000-line list, (c) time from a memory-pressure event
# (a byte on the MEMORY_PRESSURE_WATCH FIFO) to an empty memory tier, and RSS before/after.
#
#   bench/memory-bench.sh [--quick] [--urls N] [--claim-lines N] [--pressure-runs R]
#                         [--memory-limit SIZE] [--no-loop] [--parts warm,claim,pressure]
#
# Environment: IMGD=/path/to/imgd (otherwise it builds .build/release/imgd), PYTHON (python3).
# Writes its section of bench/RESULTS.md (between the memory-bench marker comments).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=memory
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/memory     # git-ignored (bench/work): fs image, mount, nginx, logs
URLS=100000
CLAIM_LINES=1000000
PRESSURE_RUNS=5
MEMORY_LIMIT=64MiB
PARTS=warm,claim,pressure
CORPUS_SMALL=2000               # the prefetch benchmark's --quick corpus (shared, kept)
USE_LOOP=1
MOUNTED=0
IMGD_BIN=""
ORIG_ARGS="$*"

usage() {
    script_header 10
    cat <<'EOF'

Options:
  --quick              10,000 URLs, a 100,000-line list, 3 pressure runs (smoke test)
  --urls N             URLs to warm in (a) (default 100000)
  --claim-lines N      lines of the list claimed in (b) (default 1000000)
  --pressure-runs R    runs of (c) (default 5)
  --memory-limit SIZE  the daemon's --memory-limit (default 64MiB, imgd's default)
  --parts LIST         which parts: warm,claim,pressure (pressure needs warm's cache)
  --no-loop            work in bench/work/memory on / instead of a journaled ext4 loop image
EOF
}

parse_args() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --quick) URLS=10000; CLAIM_LINES=100000; PRESSURE_RUNS=3 ;;
            --urls) URLS=$2; shift ;;
            --claim-lines) CLAIM_LINES=$2; shift ;;
            --pressure-runs) PRESSURE_RUNS=$2; shift ;;
            --memory-limit) MEMORY_LIMIT=$2; shift ;;
            --parts) PARTS=$2; shift ;;
            --no-loop) USE_LOOP=0 ;;
            -h|--help) usage; exit 0 ;;
            *) usage >&2; die "unknown option: $1" ;;
        esac
        shift
    done
    [[ $URLS =~ ^[1-9][0-9]*$ && $CLAIM_LINES =~ ^[1-9][0-9]*$ && $PRESSURE_RUNS =~ ^[1-9][0-9]*$ ]] \
        || die "--urls, --claim-lines and --pressure-runs want positive numbers"
    [[ $PARTS =~ ^(warm|claim|pressure)(,(warm|claim|pressure))*$ ]] || die "--parts wants warm,claim,pressure"
    require_root "apt-get, mount, nginx"
}

# nginx with the prefetch benchmark's template, serving the small corpus. Query strings are
# ignored by its static file handler: /s/xx/f.png?v=3 is f.png (checked below).
start_nginx() {
    local dir=$WORK/nginx port url
    nginx_start "$dir" "$CORPUS"
    port=$NGINX_PORT
    "$PYTHON" "$BENCH_DIR/gen_corpus.py" lists --dir "$CORPUS" --base-url "http://127.0.0.1:$port" --out "$WORK/lists"
    url=$(head -1 "$WORK/lists/small.txt")
    cmp -s <(curl -q -sS --fail "$url?v=7") "$CORPUS/${url#http://127.0.0.1:$port/}" \
        || die "nginx does not serve $url?v=7 as $url (see $dir/error.log)"
    log "nginx $(nginx_version) on 127.0.0.1:$port, pid $(cat "$dir/nginx.pid"), root $CORPUS"
}

main() {
    parse_args "$@"
    mkdir -p "$WORK"
    trap nginx_bench_cleanup EXIT
    trap 'exit 130' INT TERM
    ensure_nginx_bench_packages
    prepare_imgd "$WORK/build.log"
    # (a) stores ~URLS × 16 KB; (b)'s list and state database ~150 MB per million lines.
    setup_data_area $(( URLS / 1000 * 20 + CLAIM_LINES / 1000000 * 1024 + 1024 ))
    CORPUS=$BENCH_DIR/work/corpus/s$CORPUS_SMALL-l20
    "$PYTHON" "$BENCH_DIR/gen_corpus.py" generate --dir "$CORPUS" --small "$CORPUS_SMALL" --large 20
    find "$CORPUS/s" -type f -print0 | xargs -0 cat >/dev/null    # into the page cache
    start_nginx
    log "imgd: $IMGD_BIN; parts $PARTS"
    IMGD_BENCH_PIDFILE=$WORK/daemon.pid "$PYTHON" "$BENCH_DIR/memory_bench.py" --imgd "$IMGD_BIN" \
        --work "$DATA" --base-list "$WORK/lists/small.txt" --urls "$URLS" --claim-lines "$CLAIM_LINES" \
        --pressure-runs "$PRESSURE_RUNS" --memory-limit "$MEMORY_LIMIT" --parts "$PARTS" --fs "$FS_DESC" \
        --results "$BENCH_DIR/RESULTS.md" --command "bench/memory-bench.sh${ORIG_ARGS:+ $ORIG_ARGS}"
}

main "$@"
