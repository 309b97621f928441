#!/usr/bin/env bash
# Carry-the-warm-set benchmark: N images fetched by daemon A from a local origin (nginx serving
# gen_corpus.py's PNGs) with `imgctl warm --wait`, beside the same N imported by daemon B from
# A's `imgctl export` with `imgctl import`. Prints wall seconds, images/s and MB/s of each, and
# the export's. Each daemon has its own folder under bench/work/carry (on / unless WORK_FS is a
# mounted journaled filesystem: see TOOLCHAIN's note on ext4 without a journal).
#
#   bench/carry-bench.sh [--small N] [--runs R]
#
# Environment: IMGD and IMGCTL (otherwise built with `swift build -c release`).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=carry-bench
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/carry
SMALL=2000
RUNS=3

while [[ $# -gt 0 ]]; do
    case $1 in
        --small) SMALL=$2; shift ;;
        --runs) RUNS=$2; shift ;;
        -h|--help) script_header 9; exit 0 ;;
        *) die "unknown option: $1" ;;
    esac
    shift
done

if [[ -z ${IMGD:-} || -z ${IMGCTL:-} ]]; then
    log "building imgd and imgctl (release)"
    release_build "$WORK.build.log" "$REPO_DIR/.build" imgd imgctl || die "the release build failed (see $WORK.build.log)"
    IMGD=$REPO_DIR/.build/release/imgd IMGCTL=$REPO_DIR/.build/release/imgctl
fi
mkdir -p "$WORK"
CORPUS=$WORK/corpus
"$PYTHON" "$BENCH_DIR/gen_corpus.py" generate --dir "$CORPUS" --small "$SMALL" --large 0 >&2
trap 'nginx_stop "$WORK/nginx"; for p in $WORK/*/daemon.pid; do [[ -s $p ]] && kill "$(cat "$p")" 2>/dev/null; done; true' EXIT
nginx_start "$WORK/nginx" "$CORPUS"
"$PYTHON" "$BENCH_DIR/gen_corpus.py" lists --dir "$CORPUS" --base-url "http://127.0.0.1:$NGINX_PORT" --out "$WORK/lists" >&2
# Read the corpus once so neither side pays for cold files (TOOLCHAIN: idle files leave the page cache).
cat "$CORPUS"/s/*/*.png >/dev/null
BYTES=$(awk -F'\t' '$1 ~ /^s\// { sum += $2 } END { print sum }' "$CORPUS/manifest.tsv")

# start_daemon NAME: imgd in $WORK/NAME (fresh), its pid in $WORK/NAME/daemon.pid.
start_daemon() {
    local dir=$WORK/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    (cd "$dir" && exec "$IMGD" run --socket "$dir/imgd.sock" --disk-limit 8GiB >"$dir/imgd.log" 2>&1) &
    echo $! >"$dir/daemon.pid"
    for _ in $(seq 300); do "$IMGCTL" status --socket "$dir/imgd.sock" >/dev/null 2>&1 && return 0; sleep 0.05; done
    die "imgd did not start in $dir (see $dir/imgd.log)"
}
stop_daemon() {
    local pid
    pid=$(cat "$WORK/$1/daemon.pid")
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -f "$WORK/$1/daemon.pid"
}
now() { date +%s.%N; }
rate() { awk -v n="$1" -v b="$2" -v s="$3" 'BEGIN { printf "%7.2f s  %8.0f images/s  %7.1f MB/s", s, n / s, b / s / 1e6 }'; }

for run in $(seq "$RUNS"); do
    start_daemon a
    t0=$(now)
    "$IMGCTL" warm --socket "$WORK/a/imgd.sock" --wait "$WORK/lists/small.txt" >/dev/null 2>&1 || die "warm failed (see $WORK/a/imgd.log)"
    t1=$(now)
    "$IMGCTL" export --socket "$WORK/a/imgd.sock" --all >"$WORK/warm.tar" 2>/dev/null
    t2=$(now)
    stop_daemon a
    start_daemon b
    cat "$WORK/warm.tar" >/dev/null
    t3=$(now)
    "$IMGCTL" import --socket "$WORK/b/imgd.sock" "$WORK/warm.tar" >"$WORK/import.out" || die "import failed: $(cat "$WORK/import.out")"
    t4=$(now)
    stop_daemon b
    fetch=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    export_s=$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')
    import_s=$(awk -v a="$t3" -v b="$t4" 'BEGIN { print b - a }')
    printf 'run %d, %d images, %d bytes\n  fetch (warm --wait) %s\n  export              %s\n  import              %s\n  %s\n' \
        "$run" "$SMALL" "$BYTES" "$(rate "$SMALL" "$BYTES" "$fetch")" "$(rate "$SMALL" "$BYTES" "$export_s")" \
        "$(rate "$SMALL" "$BYTES" "$import_s")" "$(cat "$WORK/import.out")"
done
