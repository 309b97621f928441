#!/usr/bin/env bash
# imgd under abuse (issue 15 §1): at once, 40 `add` requests of 30,000 URLs on one connection,
# 10 clients asking `get data:true` for a 40 MB image and never reading, a spool list of 10,000
# lines of 8 KiB junk and 256 idle `subscribe` connections, while 16 well-behaved clients loop
# `get` of small cached images. Samples the daemon's peak RSS (VmHWM) and counts the
# well-behaved requests answered and not. Target: peak RSS < 256 MiB, every one answered.
#
#   bench/abuse-load.sh [--quick] [--duration S] [--patterns add,data,junk,subscribe] [--long-urls] [--no-loop]
#
# Environment: IMGD=/path/to/imgd (otherwise it builds .build/release/imgd), PYTHON (python3).
# Writes its section of bench/RESULTS.md (between the abuse-load marker comments); the exit
# status is 1 when a target is missed.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=abuse
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/abuse      # git-ignored (bench/work): fs image, mount, nginx, logs
DURATION=30
CORPUS_SMALL=2000               # the prefetch benchmark's --quick corpus (shared, kept)
BIG_MB=40
PATTERNS=add,data,junk,subscribe
LONG_URLS=()
USE_LOOP=1
MOUNTED=0
IMGD_BIN=""
ORIG_ARGS="$*"

usage() {
    script_header 12
    cat <<'EOF2'

Options:
  --quick         10 s of abuse instead of 30 (smoke test)
  --duration S    seconds of abuse (default 30)
  --patterns LIST which abusers run (default add,data,junk,subscribe; a subset shows what each costs)
  --long-urls     the add flood sends 840 adds of 127 URLs of ~8,000 characters (byte bounds)
  --no-loop       work in bench/work/abuse on / instead of a journaled ext4 loop image
EOF2
}

parse_args() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --quick) DURATION=10 ;;
            --duration) DURATION=$2; shift ;;
            --patterns) PATTERNS=$2; shift ;;
            --long-urls) LONG_URLS=(--long-urls) ;;
            --no-loop) USE_LOOP=0 ;;
            -h|--help) usage; exit 0 ;;
            *) usage >&2; die "unknown option: $1" ;;
        esac
        shift
    done
    [[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "--duration wants a positive number of seconds"
    require_root "apt-get, mount, nginx"
}

# The big image: a real PNG of random pixels (incompressible, so ~40 MB on the wire and on
# disk), under the corpus root so nginx serves it beside the small set.
make_big_image() {
    local path=$CORPUS/big/big-${BIG_MB}mb.png
    [[ -s $path ]] && return 0
    mkdir -p "$CORPUS/big"
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$BENCH_DIR "$PYTHON" -c '
import random, sys, gen_corpus
mb = float(sys.argv[2])
width = 3000
height = int(mb * 1e6 / (3 * width))
data = gen_corpus.png(width, height, random.Random(40))
open(sys.argv[1] + ".tmp", "wb").write(data)
' "$path" "$BIG_MB"
    mv "$path.tmp" "$path"
}

main() {
    parse_args "$@"
    mkdir -p "$WORK"
    trap nginx_bench_cleanup EXIT
    trap 'exit 130' INT TERM
    ensure_nginx_bench_packages
    prepare_imgd "$WORK/build.log"
    # The cache holds the small set and the big image; the junk list is 80 MB, its report more.
    setup_data_area 1024
    CORPUS=$BENCH_DIR/work/corpus/s$CORPUS_SMALL-l20
    "$PYTHON" "$BENCH_DIR/gen_corpus.py" generate --dir "$CORPUS" --small "$CORPUS_SMALL" --large 20
    make_big_image
    find "$CORPUS/s" "$CORPUS/big" -type f -print0 | xargs -0 cat >/dev/null    # into the page cache
    nginx_start "$WORK/nginx" "$CORPUS"
    local base=http://127.0.0.1:$NGINX_PORT
    "$PYTHON" "$BENCH_DIR/gen_corpus.py" lists --dir "$CORPUS" --base-url "$base" --out "$WORK/lists"
    local big_url=$base/big/big-${BIG_MB}mb.png
    curl -q -sS --fail -o /dev/null "$big_url" || die "nginx does not serve $big_url (see $WORK/nginx/error.log)"
    log "nginx $(nginx_version) on 127.0.0.1:$NGINX_PORT; imgd: $IMGD_BIN; $DURATION s of abuse"
    IMGD_BENCH_PIDFILE=$WORK/daemon.pid "$PYTHON" "$BENCH_DIR/abuse_load.py" --imgd "$IMGD_BIN" \
        --work "$DATA" --small-list "$WORK/lists/small.txt" --big-url "$big_url" --big-mb "$BIG_MB" \
        --duration "$DURATION" --patterns "$PATTERNS" "${LONG_URLS[@]}" --results "$BENCH_DIR/RESULTS.md" \
        --command "bench/abuse-load.sh${ORIG_ARGS:+ $ORIG_ARGS}"
}

main "$@"
