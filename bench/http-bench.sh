#!/usr/bin/env bash
# HTTP face benchmark: cached images asked over imgd's HTTP face (keep-alive, wrk) beside the
# same images asked as `get` on its control socket (imgd-lookup-bench) and served by nginx
# from files (the plain static peer), on this machine, interleaved, several runs each.
# Writes its section of bench/RESULTS.md. See bench/README.md, "HTTP face benchmark".
#
#   bench/http-bench.sh [--quick] [--runs R] [--seconds S] [--connections N] [--urls N] [--no-results]
#
# Environment: IMGD=/path/to/imgd and LOOKUP_BENCH=/path/to/imgd-lookup-bench (otherwise built
# with `swift build -c release`), SCRATCH (SwiftPM's --scratch-path, default .build).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=http-bench
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/http
SCRATCH=${SCRATCH:-$REPO_DIR/.build}

RUNS=3
SECONDS_PER_RUN=3
CONNECTIONS=16
URLS=1000
WRITE_RESULTS=1
ORIG_ARGS="$*"
IMGD_PID=""
HTTP_PORT=""

usage() {
    script_header 9
    cat <<'EOF'

Options:
  --quick          1 run of 1 s, 200 URLs (a smoke test)
  --runs R         interleaved runs of each system (default 3; the table shows medians)
  --seconds S      seconds per run (default 3)
  --connections N  keep-alive connections (HTTP) and clients (control socket), default 16
  --urls N         cached images asked for, round robin (default 1000)
  --no-results     leave bench/RESULTS.md as it is
EOF
}

parse_args() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --quick) RUNS=1; SECONDS_PER_RUN=1; URLS=200 ;;
            --runs) RUNS=$2; shift ;;
            --seconds) SECONDS_PER_RUN=$2; shift ;;
            --connections) CONNECTIONS=$2; shift ;;
            --urls) URLS=$2; shift ;;
            --no-results) WRITE_RESULTS=0 ;;
            -h|--help) usage; exit 0 ;;
            *) usage >&2; die "unknown option: $1" ;;
        esac
        shift
    done
    [[ $RUNS =~ ^[1-9][0-9]*$ && $SECONDS_PER_RUN =~ ^[1-9][0-9]*$ && $URLS =~ ^[1-9][0-9]*$ && $CONNECTIONS =~ ^[1-9][0-9]*$ ]] \
        || die "--runs, --seconds, --connections and --urls want positive whole numbers"
    require_root "apt-get"
}

cleanup() {
    local status=$?
    if [[ -n $IMGD_PID ]] && kill -0 "$IMGD_PID" 2>/dev/null; then
        kill -TERM "$IMGD_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$IMGD_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$IMGD_PID" 2>/dev/null || true
    fi
    nginx_stop "$WORK/nginx"
    exit "$status"
}

main() {
    parse_args "$@"
    mkdir -p "$WORK/logs"
    trap cleanup EXIT
    local want=()
    command -v wrk >/dev/null || want+=(wrk)
    command -v nginx >/dev/null || want+=(nginx)
    apt_install "$WORK/logs/apt.log" "${want[@]}"

    local bin_dir products=()
    [[ -z ${IMGD:-} ]] && products+=(imgd)
    [[ -z ${LOOKUP_BENCH:-} ]] && products+=(imgd-lookup-bench)
    if [[ ${#products[@]} -gt 0 ]]; then
        log "building ${products[*]} (release; log: $WORK/logs/build.log)"
        release_build "$WORK/logs/build.log" "$SCRATCH" "${products[@]}" || die "the release build failed (see $WORK/logs/build.log)"
        bin_dir=$(cd "$REPO_DIR" && swift build -c release --scratch-path "$SCRATCH" --show-bin-path)
    fi
    local imgd_bin=${IMGD:-$bin_dir/imgd} client_bin=${LOOKUP_BENCH:-$bin_dir/imgd-lookup-bench}

    # The images, served by nginx (imgd's origin, and the static peer).
    local corpus=$WORK/corpus/s$URLS
    python3 "$BENCH_DIR/gen_corpus.py" generate --dir "$corpus" --small "$URLS" --large 0 >&2
    nginx_start "$WORK/nginx" "$corpus"
    local nginx_port=$NGINX_PORT
    python3 "$BENCH_DIR/gen_corpus.py" lists --dir "$corpus" --base-url "http://127.0.0.1:$nginx_port" --out "$WORK/lists"
    local list=$WORK/lists/small.txt

    # imgd with its HTTP face, warmed with the list.
    HTTP_PORT=$(free_port)
    rm -rf "$WORK/imgd"
    mkdir -p "$WORK/imgd"
    "$imgd_bin" --spool "$WORK/imgd/spool" --cache "$WORK/imgd/cache" --state "$WORK/imgd/state" \
        --socket "$WORK/imgd/imgd.sock" --http-listen "127.0.0.1:$HTTP_PORT" \
        --max-connections-per-peer 64 >"$WORK/logs/imgd.log" 2>&1 </dev/null &
    IMGD_PID=$!
    for _ in $(seq 300); do grep -q 'imgd: ready' "$WORK/logs/imgd.log" && break; sleep 0.1; done
    grep -q 'imgd: ready' "$WORK/logs/imgd.log" || die "imgd not ready (see $WORK/logs/imgd.log)"
    cp "$list" "$WORK/imgd/spool/.warm.txt.tmp" && mv "$WORK/imgd/spool/.warm.txt.tmp" "$WORK/imgd/spool/warm.txt"
    for _ in $(seq 1200); do [[ -e $WORK/imgd/spool/done/warm.txt ]] && break; sleep 0.1; done
    [[ -e $WORK/imgd/spool/done/warm.txt ]] || die "warming did not finish (see $WORK/imgd/spool)"
    log "imgd warmed $URLS images; HTTP face on 127.0.0.1:$HTTP_PORT, nginx on 127.0.0.1:$nginx_port"

    # wrk's script: each request the next image, in the path form (imgd) or as a file (nginx).
    python3 - "$list" "$WORK/imgd-paths.lua" "$WORK/nginx-paths.lua" <<'PY'
import sys, urllib.parse
urls = [line.strip() for line in open(sys.argv[1]) if line.strip()]
def script(paths, out):
    with open(out, "w") as f:
        f.write("local paths = {\n" + ",\n".join('"%s"' % p for p in paths) + "\n}\n")
        f.write("local i = 0\nrequest = function()\n  i = i % #paths + 1\n  return wrk.format(\"GET\", paths[i])\nend\n")
script(["/http/" + u.split("://", 1)[1] for u in urls], sys.argv[2])
script([urllib.parse.urlsplit(u).path for u in urls], sys.argv[3])
PY

    local tsv=$WORK/runs.tsv run rps
    : >"$tsv"
    for run in $(seq "$RUNS"); do
        rps=$(wrk_rps "http://127.0.0.1:$HTTP_PORT" "$WORK/imgd-paths.lua")
        printf 'imgd-http\t%s\t%s\n' "$run" "$rps" >>"$tsv"
        rps=$("$client_bin" --socket "$WORK/imgd/imgd.sock" --urls "$list" --clients "$CONNECTIONS" --seconds "$SECONDS_PER_RUN" \
            --warmup 0.5 2>>"$WORK/logs/client.log" | python3 -c 'import json, sys; r = json.loads(sys.stdin.read()); print(r["requests_per_s"] if r["valid"] else 0)')
        printf 'imgd-control\t%s\t%s\n' "$run" "$rps" >>"$tsv"
        rps=$(wrk_rps "http://127.0.0.1:$nginx_port" "$WORK/nginx-paths.lua")
        printf 'nginx-static\t%s\t%s\n' "$run" "$rps" >>"$tsv"
        log "run $run: $(awk -v r="$run" -F'\t' '$2 == r { printf "%s %s/s  ", $1, $3 }' "$tsv")"
    done
    local table
    table=$(python3 - "$tsv" "$CONNECTIONS" "$URLS" "$SECONDS_PER_RUN" "$RUNS" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
conns, urls, seconds, runs = sys.argv[2:]
by = {}
for system, run, rps in rows:
    by.setdefault(system, []).append(float(rps))
control = statistics.median(by.get("imgd-control", [0])) or 1
print(f"{urls} cached images (gen_corpus.py's small PNGs, memory hits once each was asked), asked round robin on {conns} keep-alive connections / clients, "
      f"{runs} interleaved runs of {seconds} s; medians (each run's figure in brackets).\n")
print("| system | requests/s | ÷ control socket |")
print("|---|---|---|")
names = {"imgd-http": "imgd, HTTP face (wrk, keep-alive, path form)", "imgd-control": "imgd, control socket `get` (imgd-lookup-bench)",
         "nginx-static": "nginx serving the same files (wrk, keep-alive)"}
for system in ["imgd-http", "imgd-control", "nginx-static"]:
    values = by.get(system, [])
    if not values: continue
    m = statistics.median(values)
    print(f"| {names[system]} | {m:,.0f} ({', '.join(f'{v:,.0f}' for v in values)}) | {m / control:.2f} |")
PY
)
    printf '%s\n' "$table"
    if [[ $WRITE_RESULTS -eq 1 ]]; then
        write_results_section http-face "bench/http-bench.sh $ORIG_ARGS" "$table"
        log "wrote the http-face section of bench/RESULTS.md"
    fi
}

# wrk_rps BASE SCRIPT: requests per second of one wrk run (2 threads, CONNECTIONS connections).
wrk_rps() {
    local out
    out=$(wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_PER_RUN}s" -s "$2" "$1" 2>>"$WORK/logs/wrk.log")
    printf '%s\n' "$out" >>"$WORK/logs/wrk.log"
    if grep -q 'Non-2xx' <<<"$out"; then log "wrk saw errors: $(grep 'Non-2xx' <<<"$out")"; fi
    awk '/^Requests\/sec:/ { print $2 }' <<<"$out"
}

main "$@"
