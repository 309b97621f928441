#!/usr/bin/env bash
# Scrape benchmark: does a metrics scrape stall the daemon? `get` hits over the control socket
# (imgd-lookup-bench) while a thread of the same tool scrapes the metrics 1,000 times a second
# and a large list warms from a local nginx; the lookups' p50/p99/max against a limit (5 ms).
# Writes its section of bench/RESULTS.md. See bench/README.md, "Scrape benchmark".
#
#   bench/scrape-bench.sh [--runs R] [--seconds S] [--scrape-rate N] [--max-latency-ms MS]
#                         [--clients C] [--lookup-urls N] [--warm-urls N] [--scrape-url URL | --http]
#                         [--no-control] [--no-loop] [--no-results]
#
# Environment: IMGD=/path/to/imgd and LOOKUP_BENCH=/path/to/imgd-lookup-bench (otherwise both
# are built with `swift build -c release`), SCRATCH (SwiftPM's --scratch-path, default .build).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=scrape-bench
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/scrape     # git-ignored: corpus, imgd's folders, logs, raw results
SCRATCH=${SCRATCH:-$REPO_DIR/.build}

RUNS=1
SECONDS_PER_RUN=5
SCRAPE_RATE=1000
MAX_LATENCY_MS=5
CLIENTS=4
LOOKUP_URLS=1000
WARM_URLS=20000
SCRAPE_URL=""
HTTP_FACE=0
WRITE_RESULTS=1
CONTROL=1
USE_LOOP=1
DATA=""
FS_DESC=""
ORIG_ARGS="$*"

IMGD_BIN=""
CLIENT_BIN=""
IMGD_PID=""
SOCKET=""
RUNS_TSV=""
FAILED=0

usage() {
    script_header 12
    cat <<'EOF'

Options:
  --runs R            runs, each beside a list of its own --warm-urls URLs (default 1)
  --seconds S         measured seconds per run (default 5)
  --scrape-rate N     scrapes a second (default 1000)
  --max-latency-ms MS a lookup slower than this fails the run (default 5)
  --clients C         lookup connections, one request in flight each (default 4)
  --lookup-urls N     cached images looked up (default 1000)
  --warm-urls N       images of each run's warming list (default 20000)
  --scrape-url URL    scrape GET URL (the HTTP face's http://127.0.0.1:PORT/metrics) instead of
                      the control socket's metrics command
  --http              start imgd with its HTTP face on a free loopback port and scrape its
                      /metrics (what a Prometheus server does)
  --no-control        no control runs: by default each run is followed by the same run without
                      the scraper (its own warming list), so the table shows what the scrapes add
  --no-loop           the daemon's folders on / rather than on a journaled ext4 image on a loop
                      device (needs root); / here is ext4 without a journal, where refilling a
                      cache just emptied turns quadratic (TOOLCHAIN.md)
  --no-results        leave bench/RESULTS.md as it is
EOF
}

parse_args() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --runs) RUNS=$2; shift ;;
            --seconds) SECONDS_PER_RUN=$2; shift ;;
            --scrape-rate) SCRAPE_RATE=$2; shift ;;
            --max-latency-ms) MAX_LATENCY_MS=$2; shift ;;
            --clients) CLIENTS=$2; shift ;;
            --lookup-urls) LOOKUP_URLS=$2; shift ;;
            --warm-urls) WARM_URLS=$2; shift ;;
            --scrape-url) SCRAPE_URL=$2; shift ;;
            --http) HTTP_FACE=1 ;;
            --no-results) WRITE_RESULTS=0 ;;
            --no-control) CONTROL=0 ;;
            --no-loop) USE_LOOP=0 ;;
            -h|--help) usage; exit 0 ;;
            *) usage >&2; die "unknown option $1" ;;
        esac
        shift
    done
}

build() {
    local products=() bin_dir
    [[ -z ${IMGD:-} ]] && products+=(imgd)
    [[ -z ${LOOKUP_BENCH:-} ]] && products+=(imgd-lookup-bench)
    if [[ ${#products[@]} -gt 0 ]]; then
        log "building ${products[*]}: swift build -c release --scratch-path $SCRATCH (log: $WORK/logs/build.log)"
        release_build "$WORK/logs/build.log" "$SCRATCH" "${products[@]}" \
            || die "the release build of $BUILD_PRODUCT failed (see $WORK/logs/build.log)"
        bin_dir=$(cd "$REPO_DIR" && swift build -c release --scratch-path "$SCRATCH" --show-bin-path)
    fi
    IMGD_BIN=${IMGD:-$bin_dir/imgd}
    CLIENT_BIN=${LOOKUP_BENCH:-$bin_dir/imgd-lookup-bench}
    [[ -x $IMGD_BIN && -x $CLIENT_BIN ]] || die "no executable at $IMGD_BIN or $CLIENT_BIN"
}

# One corpus of LOOKUP_URLS + RUNS × WARM_URLS small PNGs on nginx: the first LOOKUP_URLS are
# warmed before any run and looked up; each run warms the next WARM_URLS.
serve_images() {
    local total=$(( LOOKUP_URLS + (CONTROL + 1) * RUNS * WARM_URLS ))
    local corpus=$WORK/corpus/s$total
    "$PYTHON" "$BENCH_DIR/gen_corpus.py" generate --dir "$corpus" --small "$total" --large 0 >&2
    nginx_start "$WORK/nginx" "$corpus"
    "$PYTHON" "$BENCH_DIR/gen_corpus.py" lists --dir "$corpus" --base-url "http://127.0.0.1:$NGINX_PORT" --out "$WORK/lists"
    sed -n "1,${LOOKUP_URLS}p" "$WORK/lists/small.txt" >"$WORK/lists/lookup.txt"
    curl -q -sS --fail -o /dev/null "$(head -1 "$WORK/lists/lookup.txt")" || die "nginx does not serve the corpus"
    log "nginx on 127.0.0.1:$NGINX_PORT serves $total images"
}

start_imgd() {
    setup_data_area $(( (LOOKUP_URLS + (CONTROL + 1) * RUNS * WARM_URLS) * 48 / 1024 + 512 ))
    SOCKET=$DATA/imgd.sock
    local http=()
    if [[ $HTTP_FACE -eq 1 ]]; then
        local port
        port=$(free_port)
        http=(--http-listen "127.0.0.1:$port")
        SCRAPE_URL="http://127.0.0.1:$port/metrics"
    fi
    "$IMGD_BIN" --spool "$DATA/spool" --cache "$DATA/cache" --state "$DATA/state" --socket "$SOCKET" \
        --max-connections-per-peer 64 "${http[@]}" >"$WORK/logs/imgd.log" 2>&1 </dev/null &
    IMGD_PID=$!
    for _ in $(seq 300); do
        grep -q 'imgd: ready' "$WORK/logs/imgd.log" && break
        kill -0 "$IMGD_PID" 2>/dev/null || die "imgd exited at start (see $WORK/logs/imgd.log)"
        sleep 0.1
    done
    grep -q 'imgd: ready' "$WORK/logs/imgd.log" || die "imgd not ready after 30 s"
}

# drop NAME FILE: the list written under a dot name, then renamed into the spool.
drop() {
    cp "$2" "$DATA/spool/.$1.tmp"
    mv "$DATA/spool/.$1.tmp" "$DATA/spool/$1"
}

warm_lookups() {
    drop lookup.txt "$WORK/lists/lookup.txt"
    for _ in $(seq 1200); do
        [[ -e $DATA/spool/done/lookup.txt ]] && break
        [[ -e $DATA/spool/failed/lookup.txt ]] && die "warming failed: see $DATA/spool/failed/"
        sleep 0.1
    done
    [[ -e $DATA/spool/done/lookup.txt ]] || die "warming $LOOKUP_URLS URLs took over 2 minutes"
    log "imgd warmed the $LOOKUP_URLS lookup URLs"
}

# URLs of the list warming now that are settled (cached or failed), from `lists`.
settled() {
    "$PYTHON" - "$SOCKET" "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"cmd":"lists"}\n')
reply = b""
while not reply.endswith(b"\n"):
    reply += s.recv(1 << 20)
for entry in json.loads(reply)["result"].get("lists", []):
    if entry.get("name") == sys.argv[2]:
        print(entry.get("total", 0) - entry.get("pending", 0))
        break
else:
    print(-1)
PY
}

# run_one RUN SLICE scrape|none: one measured run beside the warming of the SLICE-th list.
run_one() {
    local run=$1 name="warm-$2.txt" mode=$3 line rc=0 before after scrape=()
    local first=$(( LOOKUP_URLS + ($2 - 1) * WARM_URLS + 1 ))
    # sed, not tail | head: head's early exit would be a SIGPIPE that pipefail turns into a failure.
    sed -n "${first},$(( first + WARM_URLS - 1 ))p" "$WORK/lists/small.txt" >"$WORK/lists/$name"
    drop "$name" "$WORK/lists/$name"
    # The list claimed and warming before the lookups start.
    for _ in $(seq 100); do
        before=$(settled "$name")
        [[ $before -gt 0 ]] && break
        sleep 0.05
    done
    if [[ $mode == scrape ]]; then
        scrape=(--scrape-rate "$SCRAPE_RATE")
        if [[ -n $SCRAPE_URL ]]; then scrape+=(--scrape-url "$SCRAPE_URL"); fi
    fi
    line=$("$CLIENT_BIN" --socket "$SOCKET" --urls "$WORK/lists/lookup.txt" --clients "$CLIENTS" --seconds "$SECONDS_PER_RUN" \
        --warmup 0.5 --server-pid "$IMGD_PID" "${scrape[@]}" \
        --max-latency-ms "$MAX_LATENCY_MS" 2>>"$WORK/logs/client.log") || rc=$?
    after=$(settled "$name")
    # Only the scraped runs decide: a control run over the limit says the limit is the machine's.
    [[ $rc -eq 0 || $mode == none ]] || FAILED=1
    log "run $run ($mode): exit $rc; warming list settled $before → $after of $WARM_URLS; $line"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$mode" "$rc" "$before" "$after" "${line:-{\}}" >>"$RUNS_TSV"
}

cleanup() {
    local status=$?
    if [[ -n $IMGD_PID ]] && kill -0 "$IMGD_PID" 2>/dev/null; then
        kill -TERM "$IMGD_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$IMGD_PID" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$IMGD_PID" 2>/dev/null && kill -KILL "$IMGD_PID"
        wait "$IMGD_PID" 2>/dev/null || true
    fi
    nginx_stop "$WORK/nginx"
    unmount_work_fs "$WORK"
    exit "$status"
}

write_results() {
    local body
    body=$("$PYTHON" - "$RUNS_TSV" "$SCRAPE_RATE" "$MAX_LATENCY_MS" "$CLIENTS" "$WARM_URLS" "$SECONDS_PER_RUN" "$SCRAPE_URL" "$FS_DESC" $ORIG_ARGS <<'PY'
import json, sys
path, rate, limit, clients, warm, seconds, url, fs = sys.argv[1:9]
rows = []
for line in open(path):
    run, mode, rc, before, after, record = line.rstrip("\n").split("\t", 5)
    r = json.loads(record) if record.strip() not in ("", "{}") else {}
    rows.append((run, mode, rc, before, after, r))
target = url or "the control socket's metrics command"
import time
stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
out = ["## Scrape benchmark: lookups beside 1,000 scrapes a second and a warming list", "",
       f"Run {stamp} with `bench/scrape-bench.sh {' '.join(sys.argv[9:])}`; load average {open('/proc/loadavg').read().split()[0]} at the end.", "",
       f"{clients} lookup connections (one `get` in flight each, all hits) for {seconds} s, while a thread "
       f"scrapes {target} {rate} times a second and a list of {warm} new URLs warms from a local nginx. "
       f"The daemon's folders: {fs}. "
       f"A run fails when one lookup takes over {limit} ms. Each run is followed by a control run without "
       f"the scraper (its own warming list, when there is one): what the lookups see anyway on this machine.", "",
       "| run | scrapes | lookups/s | p50 ms | p99 ms | max ms | scrapes/s | scrape p50 ms | scrape max ms | scrape bytes | list settled (start → end) | result |",
       "|---|---|---|---|---|---|---|---|---|---|---|---|"]
for run, mode, rc, before, after, r in rows:
    verdict = "pass" if rc == "0" else ("over the limit" if rc == "4" else f"failed (exit {rc})")
    out.append(f"| {run} | {'yes' if mode == 'scrape' else 'no (control)'} | {r.get('requests_per_s', '-')} | {r.get('p50_ms', '-')} | {r.get('p99_ms', '-')} | {r.get('max_ms', '-')} "
               f"| {r.get('scrapes_per_s', '-')} | {r.get('scrape_p50_ms', '-')} | {r.get('scrape_max_ms', '-')} | {r.get('scrape_bytes', '-')} "
               f"| {before} → {after} of {warm} | {verdict} |")
print("\n".join(out))
PY
)
    write_results_section "scrape-bench" "bench/scrape-bench.sh" "$body"
}

main() {
    parse_args "$@"
    mkdir -p "$WORK/logs" "$WORK/results"
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    build
    serve_images
    start_imgd
    warm_lookups
    RUNS_TSV=$WORK/results/runs-$(date -u +%Y%m%dT%H%M%SZ).tsv
    : >"$RUNS_TSV"
    local slice=0
    for run in $(seq "$RUNS"); do
        slice=$(( slice + 1 )); run_one "$run" "$slice" scrape
        if [[ $CONTROL -eq 1 ]]; then slice=$(( slice + 1 )); run_one "$run" "$slice" none; fi
    done
    if [[ $WRITE_RESULTS -eq 1 ]]; then
        write_results
        log "wrote bench/RESULTS.md"
    fi
    [[ $FAILED -eq 0 ]] || { log "some runs FAILED (see above and $WORK/logs/)"; exit 1; }
}

main "$@"
