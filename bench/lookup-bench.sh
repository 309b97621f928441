#!/usr/bin/env bash
# Lookup benchmark: `get` hits over imgd's control socket against redis-benchmark's GET on a
# Redis started for the run, both on Unix sockets on this machine, at 1, 16 and 64 clients,
# pipelined (depth 16) and not, interleaved (imgd redis imgd redis …), several runs each.
# Writes its section of bench/RESULTS.md. See bench/README.md, "Lookup benchmark".
#
#   bench/lookup-bench.sh [--quick] [--runs R] [--seconds S] [--clients 1,16,64] [--depth P]
#                         [--urls N] [--perf] [--no-redis] [--floor] [--no-results] [--runs-file FILE]
#
# Environment: IMGD=/path/to/imgd and LOOKUP_BENCH=/path/to/imgd-lookup-bench (otherwise both
# are built with `swift build -c release`), SCRATCH (SwiftPM's --scratch-path, default .build),
# IMGD_REF=/path/to/another/imgd (a second daemon, warmed the same way, measured as imgd-ref
# right beside imgd in every round; bench/compare.sh).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=lookup-bench
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/lookup     # git-ignored: corpus, imgd's folders, Redis, logs, raw results
SCRATCH=${SCRATCH:-$REPO_DIR/.build}

# Settings (see usage).
RUNS=3
SECONDS_PER_RUN=3
WARMUP=1
CLIENTS=1,16,64
DEPTH=16
URLS=1000
QUICK=0
PERF=0
NO_REDIS=0
WRITE_RESULTS=1
RUNS_FILE=""
ORIG_ARGS="$*"

# State shared by the functions below.
IMGD_BIN=""
CLIENT_BIN=""
IMGD_PID=""
REF_BIN=""                      # IMGD_REF: the second daemon's binary
REF_PID=""
REDIS_PID=""
SOCKET=$WORK/imgd/imgd.sock
REF_SOCKET=$WORK/imgd-ref/imgd.sock
REDIS_SOCKET=$WORK/redis/redis.sock
FLOOR=0                         # --floor: also the bare C line server (bench/floor/line_floor.c)
FLOOR_PID=""
FLOOR_SOCKET=$WORK/floor/floor.sock
URL_LIST=""
REPLY_BYTES=0
REDIS_HITS=""
REDIS_MISSES=""
RUNS_TSV=""
FAILED=0
declare -A REDIS_REQUESTS       # requests per redis-benchmark run, by "clients depth"

usage() {
    script_header 13
    cat <<'EOF'

Options:
  --quick        1 run of 1 s per configuration, 200 URLs (smoke test, ~1 minute after the build)
  --runs R       interleaved runs per configuration (default 3; the tables show medians)
  --seconds S    measured seconds per imgd run, and the target length of a redis run (default 3)
  --clients LIST connection counts, comma-separated (default 1,16,64)
  --depth P      requests in flight per connection when pipelined (default 16, at most 64)
  --urls N       cached images looked up (default 1000)
  --perf         afterwards, profile imgd (perf record -g) during one 16-client run, not pipelined
  --no-redis     no Redis runs (imgd, and imgd-ref with IMGD_REF, only)
  --floor        also run the same client against a bare C epoll server that answers every
                 line with a real hit's reply (bench/floor/line_floor.c): the floor of a
                 lookup on this machine, beside imgd and Redis in every round
  --no-results   leave bench/RESULTS.md as it is
  --runs-file F  also copy the per-run records (system, clients, depth, run, JSON line) to F

With IMGD_REF set, a second daemon runs that binary on its own folders, warmed with the same
list, and each configuration of a round runs imgd and imgd-ref back to back (imgd first in odd
rounds, imgd-ref first in even ones), with the same client (LOOKUP_BENCH or this tree's).
EOF
}

parse_args() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --quick) QUICK=1; RUNS=1; SECONDS_PER_RUN=1; WARMUP=0.3; URLS=200 ;;
            --runs) RUNS=$2; shift ;;
            --seconds) SECONDS_PER_RUN=$2; shift ;;
            --clients) CLIENTS=$2; shift ;;
            --depth) DEPTH=$2; shift ;;
            --urls) URLS=$2; shift ;;
            --perf) PERF=1 ;;
            --no-redis) NO_REDIS=1 ;;
            --floor) FLOOR=1 ;;
            --no-results) WRITE_RESULTS=0 ;;
            --runs-file) RUNS_FILE=$2; shift ;;
            -h|--help) usage; exit 0 ;;
            *) usage >&2; die "unknown option: $1" ;;
        esac
        shift
    done
    [[ $CLIENTS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--clients wants numbers like 1,16,64"
    [[ $RUNS =~ ^[1-9][0-9]*$ && $SECONDS_PER_RUN =~ ^[1-9][0-9]*$ && $URLS =~ ^[1-9][0-9]*$ ]] \
        || die "--runs, --seconds and --urls want positive whole numbers"
    [[ $DEPTH =~ ^[1-9][0-9]*$ && $DEPTH -le 64 ]] || die "--depth wants 1 to 64 (imgd's limit of waiting requests)"
    require_root "apt-get"
}

# --- Packages and binaries ---------------------------------------------------------------

# Installs the Debian packages whose commands are missing (apt_install waits for the dpkg
# lock when other work on the machine is running apt).
ensure_packages() {
    local want=()
    if [[ $NO_REDIS -eq 0 ]]; then
        command -v redis-server >/dev/null || want+=(redis-server)
        command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null || want+=(redis-tools)
    fi
    command -v nginx >/dev/null || want+=(nginx)
    command -v curl >/dev/null || want+=(curl)
    command -v python3 >/dev/null || want+=(python3)
    if [[ $PERF -eq 1 ]]; then command -v perf >/dev/null || want+=(linux-perf); fi
    apt_install "$WORK/logs/apt.log" "${want[@]}"
    # Debian's package starts its own redis-server where it can (not in a container without
    # systemd); this benchmark never uses it, only the one it starts on a Unix socket.
}

# Builds what IMGD / LOOKUP_BENCH do not name: imgd and the client, release.
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
    if [[ -n ${IMGD_REF:-} ]]; then
        [[ -x $IMGD_REF ]] || die "IMGD_REF: no executable at $IMGD_REF"
        REF_BIN=$IMGD_REF
    fi
}

# --- Images, server, imgd, Redis ---------------------------------------------------------

# A small set of real PNGs (bench/gen_corpus.py, the prefetch benchmark's generator) served by
# nginx on 127.0.0.1: imgd must download and validate them once, then every lookup is a hit.
serve_images() {
    local corpus=$WORK/corpus/s$URLS dir=$WORK/nginx port
    python3 "$BENCH_DIR/gen_corpus.py" generate --dir "$corpus" --small "$URLS" --large 0 >&2
    nginx_start "$dir" "$corpus"
    port=$NGINX_PORT
    python3 "$BENCH_DIR/gen_corpus.py" lists --dir "$corpus" --base-url "http://127.0.0.1:$port" --out "$WORK/lists"
    URL_LIST=$WORK/lists/small.txt
    curl -q -sS --fail -o /dev/null "$(head -1 "$URL_LIST")" || die "nginx does not serve the corpus (see $dir/error.log)"
    log "nginx on 127.0.0.1:$port serves $URLS images from $corpus"
}

# Starts a daemon (BIN, in folder DIR, control socket SOCK, log LOG) on fresh folders and waits
# for its "ready" line; its pid goes to STARTED_PID. Every client connects as this one user:
# the per-uid cap (32 by default) is raised to the most clients asked for, or 64 clients would
# get `busy`.
start_daemon() {
    local bin=$1 dir=$2 sock=$3 logf=$4 most=0 clients pid
    for clients in ${CLIENTS//,/ }; do (( clients > most )) && most=$clients; done
    rm -rf "$dir"
    mkdir -p "$dir"
    "$bin" --spool "$dir/spool" --cache "$dir/cache" --state "$dir/state" --socket "$sock" \
        --max-connections-per-peer "$(( most > 32 ? most : 32 ))" \
        >"$logf" 2>&1 </dev/null &
    pid=$!
    STARTED_PID=$pid
    for _ in $(seq 300); do
        grep -q 'imgd: ready' "$logf" && break
        kill -0 "$pid" 2>/dev/null || die "imgd exited at start (see $logf)"
        sleep 0.1
    done
    grep -q 'imgd: ready' "$logf" || die "imgd not ready after 30 s (see $logf)"
    log "$(sed -n 's/^imgd: \(imgd [^ ]*\) (pid.*/\1/p' "$logf") ready, pid $pid, socket $sock"
}

# The daemon under test, and with IMGD_REF the second one (imgd-ref).
start_imgd() {
    start_daemon "$IMGD_BIN" "$WORK/imgd" "$SOCKET" "$WORK/logs/imgd.log"
    IMGD_PID=$STARTED_PID
    if [[ -n $REF_BIN ]]; then
        start_daemon "$REF_BIN" "$WORK/imgd-ref" "$REF_SOCKET" "$WORK/logs/imgd-ref.log"
        REF_PID=$STARTED_PID
    fi
}

# imgd's reply (its line, without the newline) to `get` of the list's first URL, as request 1,
# from the cache only: checked to be a hit.
hit_reply() {
    python3 - "$SOCKET" "$(head -1 "$URL_LIST")" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(json.dumps({"id": 1, "cmd": "get", "url": sys.argv[2], "fetch": False}).encode() + b"\n")
reply = b""
while not reply.endswith(b"\n"):
    reply += s.recv(65536)
assert json.loads(reply)["ok"], reply
sys.stdout.write(reply[:-1].decode())
PY
}

# Drops the list into each daemon's spool and waits until it lands in done/, so every URL is
# cached before a lookup is timed; then takes a hit's reply size (Redis's values match it).
warm_imgd() {
    warm_daemon "$WORK/imgd/spool" "$WORK/logs/imgd.log"
    [[ -z $REF_BIN ]] || warm_daemon "$WORK/imgd-ref/spool" "$WORK/logs/imgd-ref.log"
    # The size of a typical hit's reply, so Redis's values are the same size.
    local reply
    reply=$(hit_reply)
    REPLY_BYTES=$(( $(printf '%s' "$reply" | wc -c) + 1 ))
    log "a hit's reply is $REPLY_BYTES bytes (newline included)"
}

# warm_daemon SPOOL LOG: the list written under a dot name, then renamed into SPOOL; waits
# until it lands in SPOOL/done/ (LOG: that daemon's, named when it does not).
warm_daemon() {
    local spool=$1
    cp "$URL_LIST" "$spool/.lookup.txt.tmp"
    mv "$spool/.lookup.txt.tmp" "$spool/lookup.txt"
    for _ in $(seq 1200); do
        [[ -e $spool/done/lookup.txt ]] && break
        [[ -e $spool/failed/lookup.txt ]] && die "warming failed: see $spool/failed/lookup.txt.report.json"
        sleep 0.1
    done
    [[ -e $spool/done/lookup.txt ]] || die "warming $URLS URLs took over 2 minutes (see $2)"
    log "imgd warmed ($spool): $(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r["cached"], "cached in", r["duration_s"], "s")' \
        "$spool/done/lookup.txt.report.json")"
}

# Redis on a Unix socket only (no TCP port), no persistence, its own folder; the keys
# redis-benchmark's `-r URLS` asks for (key:000000000000 …) hold values of a reply's size.
start_redis() {
    local dir=$WORK/redis
    rm -rf "$dir"
    mkdir -p "$dir"
    redis-server --port 0 --unixsocket "$REDIS_SOCKET" --unixsocketperm 700 --save '' --appendonly no \
        --dir "$dir" --logfile "$dir/redis.log" --daemonize no </dev/null >/dev/null 2>&1 &
    REDIS_PID=$!
    for _ in $(seq 100); do
        redis-cli -s "$REDIS_SOCKET" ping >/dev/null 2>&1 && break
        kill -0 "$REDIS_PID" 2>/dev/null || die "redis-server exited at start (see $dir/redis.log)"
        sleep 0.1
    done
    redis-cli -s "$REDIS_SOCKET" ping >/dev/null 2>&1 || die "redis-server not answering (see $dir/redis.log)"
    python3 - "$URLS" "$REPLY_BYTES" <<'PY' | redis-cli -s "$REDIS_SOCKET" --pipe >"$WORK/logs/redis-load.log"
import sys
count, size = int(sys.argv[1]), int(sys.argv[2])
value = b"x" * size
out = sys.stdout.buffer
for i in range(count):
    key = b"key:%012d" % i
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, size, value))
PY
    local keys
    keys=$(redis-cli -s "$REDIS_SOCKET" dbsize)
    [[ $keys -eq $URLS ]] || die "Redis holds $keys keys, not $URLS"
    log "redis-server $(redis_version) on $REDIS_SOCKET, pid $REDIS_PID, $keys keys of $REPLY_BYTES bytes"
}

# The bare C line server of --floor, answering with what imgd answered for the first URL
# (its id replaced by each request's).
start_floor() {
    command -v cc >/dev/null || apt_install "$WORK/logs/apt.log" gcc
    mkdir -p "$WORK/floor"
    cc -O2 -o "$WORK/floor/line-floor" "$BENCH_DIR/floor/line_floor.c" || die "could not build bench/floor/line_floor.c"
    local reply tail
    reply=$(hit_reply)
    tail=${reply#'{"id":1'}
    [[ $tail != "$reply" ]] || die "a hit's reply does not start with its id: $reply"
    "$WORK/floor/line-floor" "$FLOOR_SOCKET" "$tail" </dev/null >"$WORK/logs/floor.log" 2>&1 &
    FLOOR_PID=$!
    for _ in $(seq 100); do [[ -S $FLOOR_SOCKET ]] && break; sleep 0.05; done
    [[ -S $FLOOR_SOCKET ]] || die "the floor server did not start (see $WORK/logs/floor.log)"
    log "floor: bench/floor/line_floor.c on $FLOOR_SOCKET, pid $FLOOR_PID"
}

redis_version() { redis-server --version | sed 's/.* v=\([^ ]*\).*/\1/'; }

# CPU seconds (user + system) a process has used so far, from /proc/PID/stat.
cpu_seconds() {
    sed 's/.*) //' "/proc/$1/stat" | awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($12 + $13) / hz }'
}

# Runs at exit, whatever happened: stop what this script started, by pid.
cleanup() {
    local status=$?
    local pid
    if [[ -n $FLOOR_PID ]]; then kill -TERM "$FLOOR_PID" 2>/dev/null || true; wait "$FLOOR_PID" 2>/dev/null || true; fi
    for pid in $IMGD_PID $REF_PID; do
        kill -0 "$pid" 2>/dev/null || continue
        kill -TERM "$pid" 2>/dev/null || true      # imgd exits within 5 s of SIGTERM
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && { log "imgd (pid $pid) still running 10 s after SIGTERM: SIGKILL"; kill -KILL "$pid"; }
        wait "$pid" 2>/dev/null || true
    done
    if [[ -n $REDIS_PID ]] && kill -0 "$REDIS_PID" 2>/dev/null; then
        kill -TERM "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
    fi
    nginx_stop "$WORK/nginx"
    exit "$status"
}

# --- Runs --------------------------------------------------------------------------------

# One imgd run: the client's JSON line goes to $RUNS_TSV; an invalid run is logged and counted.
# A fourth argument, imgd-ref, runs it against the second daemon (IMGD_REF).
run_imgd() {
    local clients=$1 depth=$2 run=$3 system=${4:-imgd} line rc=0 sock=$SOCKET pid=$IMGD_PID
    case $system in
        imgd-ref) sock=$REF_SOCKET; pid=$REF_PID ;;
        floor) sock=$FLOOR_SOCKET; pid=$FLOOR_PID ;;
    esac
    line=$("$CLIENT_BIN" --socket "$sock" --urls "$URL_LIST" --clients "$clients" --pipeline "$depth" \
        --seconds "$SECONDS_PER_RUN" --warmup "$WARMUP" --server-pid "$pid" 2>>"$WORK/logs/client.log") || rc=$?
    if [[ $rc -ne 0 || -z $line ]]; then
        FAILED=1
        log "$(printf '%-8s %2s clients, depth %2s, run %s: FAILED (exit %s) %s' "$system" "$clients" "$depth" "$run" "$rc" "$line")"
        line=${line:-'{"valid":false}'}
    else
        log "$(printf '%-8s %2s clients, depth %2s, run %s: %s' "$system" "$clients" "$depth" "$run" "$(summary imgd "$line")")"
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$system" "$clients" "$depth" "$run" "$line" >>"$RUNS_TSV"
}

# One redis-benchmark run of N requests (calibrated to last about --seconds), its CSV line and
# the server's CPU time converted to the same JSON fields as the client's.
run_redis() {
    local clients=$1 depth=$2 run=$3 requests=$4 csv before after line rc=0
    local pipeline=()
    [[ $depth -gt 1 ]] && pipeline=(-P "$depth")
    before=$(cpu_seconds "$REDIS_PID")
    csv=$(redis-benchmark -s "$REDIS_SOCKET" -t get -c "$clients" -n "$requests" -r "$URLS" "${pipeline[@]}" --csv \
        2>>"$WORK/logs/redis-benchmark.log" | tail -1) || rc=$?
    after=$(cpu_seconds "$REDIS_PID")
    line=$(python3 - "$csv" "$clients" "$depth" "$requests" "$before" "$after" <<'PY'
import csv, json, sys
row, clients, depth, requests, before, after = sys.argv[1:]
fields = next(csv.reader([row])) if row else []
if len(fields) < 8 or fields[0] != "GET":
    print(json.dumps({"valid": False, "first_error": row}))
    sys.exit()
rps = float(fields[1])
print(json.dumps({
    "clients": int(clients), "pipeline": int(depth), "requests": int(requests),
    "seconds": round(int(requests) / rps, 3), "requests_per_s": rps,
    "p50_ms": float(fields[4]), "p99_ms": float(fields[6]), "max_ms": float(fields[7]),
    "server_cpu_s": round(float(after) - float(before), 3), "valid": True}))
PY
)
    if [[ $rc -ne 0 || $line == *'"valid": false'* ]]; then
        FAILED=1
        log "$(printf 'redis    %2s clients, depth %2s, run %s: FAILED %s' "$clients" "$depth" "$run" "$line")"
    else
        log "$(printf 'redis    %2s clients, depth %2s, run %s: %s' "$clients" "$depth" "$run" "$(summary redis "$line")")"
    fi
    printf 'redis\t%s\t%s\t%s\t%s\n' "$clients" "$depth" "$run" "$line" >>"$RUNS_TSV"
}

# A run's JSON line as a log line.
summary() {
    python3 - "$1" "$2" <<'PY'
import json, sys
r = json.loads(sys.argv[2])
line = f"{r['requests_per_s']:>10,.0f} req/s  p50 {r['p50_ms']:.3f}  p99 {r['p99_ms']:.3f}"
if "p999_ms" in r:
    line += f"  p99.9 {r['p999_ms']:.3f}"
line += " ms"
if "server_cpu_s" in r:
    line += f"  server cpu {r['server_cpu_s'] * 1e6 / max(1, r['requests']):.1f} µs/req"
if "client_cpu_s" in r:
    line += f"  client cpu {r['client_cpu_s'] / r['seconds']:.2f} s/s"
print(line)
PY
}

# redis-benchmark takes a request count, not a time: one untimed run per configuration
# (which also warms Redis up) gives the rate, and the timed runs ask for --seconds of it.
calibrate_redis() {
    local clients=$1 depth=$2 probe=50000 rps pipeline=()
    [[ $depth -gt 1 ]] && { pipeline=(-P "$depth"); probe=500000; }
    rps=$(redis-benchmark -s "$REDIS_SOCKET" -t get -c "$clients" -n "$probe" -r "$URLS" "${pipeline[@]}" --csv \
        2>>"$WORK/logs/redis-benchmark.log" | tail -1 | cut -d, -f2 | tr -d '"')
    [[ $rps =~ ^[0-9.]+$ ]] || die "redis-benchmark gave no rate (see $WORK/logs/redis-benchmark.log)"
    REDIS_REQUESTS["$clients $depth"]=$(python3 -c "print(max(10000, int(float('$rps') * $SECONDS_PER_RUN)))")
}

# Interleaved: for each round, every configuration runs imgd then Redis back to back, so a
# drift of the machine (other work, the host) lands on both rather than on one. With IMGD_REF,
# imgd-ref runs beside imgd: after it in odd rounds, before it in even ones.
run_all() {
    local clients depth run
    if [[ $NO_REDIS -eq 0 ]]; then
        for clients in ${CLIENTS//,/ }; do
            for depth in 1 "$DEPTH"; do calibrate_redis "$clients" "$depth"; done
        done
    fi
    for run in $(seq "$RUNS"); do
        log "round $run of $RUNS"
        for clients in ${CLIENTS//,/ }; do
            for depth in 1 "$DEPTH"; do
                if [[ -n $REF_BIN && $((run % 2)) -eq 0 ]]; then
                    run_imgd "$clients" "$depth" "$run" imgd-ref
                    run_imgd "$clients" "$depth" "$run"
                else
                    run_imgd "$clients" "$depth" "$run"
                    [[ -z $REF_BIN ]] || run_imgd "$clients" "$depth" "$run" imgd-ref
                fi
                [[ $NO_REDIS -eq 1 ]] || run_redis "$clients" "$depth" "$run" "${REDIS_REQUESTS["$clients $depth"]}"
                [[ $FLOOR -eq 0 ]] || run_imgd "$clients" "$depth" "$run" floor
            done
        done
    done
}

# perf record -g on the running imgd during one 16-client run (not pipelined). Two reports,
# Swift names demangled: perf-report.txt, self time by library and function (--no-children:
# where the CPU was spent), and perf-inclusive.txt, time including callees (--children: which
# of imgd's steps cost what; Swift code keeps frame pointers, so its call chains are whole).
profile_imgd() {
    local data=$WORK/perf.data perf_pid demangle=(cat)
    log "profiling imgd during a 16-client run (perf record -g -p $IMGD_PID)"
    perf record -g -p "$IMGD_PID" -o "$data" -- sleep $((SECONDS_PER_RUN + 1)) >"$WORK/logs/perf.log" 2>&1 &
    perf_pid=$!
    sleep 0.2
    "$CLIENT_BIN" --socket "$SOCKET" --urls "$URL_LIST" --clients 16 --pipeline 1 --seconds "$SECONDS_PER_RUN" \
        --warmup 0.5 --server-pid "$IMGD_PID" >"$WORK/perf-run.json" 2>>"$WORK/logs/client.log" || true
    wait "$perf_pid" || die "perf record failed (see $WORK/logs/perf.log)"
    command -v swift >/dev/null && demangle=(swift demangle --simplified)
    perf report -i "$data" --no-children --stdio -g none --sort dso,sym --percent-limit 0.3 2>/dev/null \
        | "${demangle[@]}" >"$WORK/perf-report.txt"
    perf report -i "$data" --children --stdio -g none --sort sym --percent-limit 0.5 2>/dev/null \
        | "${demangle[@]}" >"$WORK/perf-inclusive.txt"
    log "during it: $(summary imgd "$(cat "$WORK/perf-run.json")")"
    log "profile: $WORK/perf-report.txt (self), $WORK/perf-inclusive.txt (with callees); top self time:"
    grep -E '^ +[0-9]' "$WORK/perf-report.txt" | head -20 | cut -c1-160 >&2
}

# --- Report ------------------------------------------------------------------------------

# Medians per configuration, the ratios and the targets, into bench/RESULTS.md between the
# lookup-bench markers (replaced if present, appended otherwise; the rest of the file is kept).
write_results() {
    LOAD_BEFORE=$1 LOAD_AFTER=$2 IMGD_REV=$(imgd_revision) ARGS=$ORIG_ARGS URLS=$URLS REPLY_BYTES=$REPLY_BYTES RUNS=$RUNS \
    SECONDS_PER_RUN=$SECONDS_PER_RUN DATE=$(date -u '+%Y-%m-%d %H:%M UTC') KERNEL=$(uname -r) CORES=$(nproc) \
    CPU=$(lscpu | sed -n 's/^Model name: *//p' | head -1) \
    MEM=$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) \
    SWIFT_VERSION=$(swift --version 2>/dev/null | head -1 | sed 's/.*version \([^ ]*\).*/\1/') \
    REDIS_HITS=$REDIS_HITS REDIS_MISSES=$REDIS_MISSES REDIS_VERSION=$(redis_version) FS=$(findmnt -n -o FSTYPE,SOURCE -T "$WORK" | awk 'NR == 1 { print $1 " on " $2 }') \
    PYTHONDONTWRITEBYTECODE=1 python3 - "$RUNS_TSV" "$BENCH_DIR/RESULTS.md" "$BENCH_DIR" <<'PY'
import json, os, statistics, sys
runs_path, results_path, bench_dir = sys.argv[1:]
sys.path.insert(0, bench_dir)
import results_md
env = os.environ
runs = {}
for line in open(runs_path):
    system, clients, depth, run, payload = line.rstrip("\n").split("\t", 4)
    runs.setdefault((system, int(clients), int(depth)), []).append(json.loads(payload))

def median(records, field):
    values = [r[field] for r in records if r.get("valid") and field in r]
    return statistics.median(values) if values else None

def num(value, spec):
    return "—" if value is None else format(value, spec)

def cpu_per_request(records):
    values = [r["server_cpu_s"] * 1e6 / r["requests"] for r in records
              if r.get("valid") and r.get("requests") and "server_cpu_s" in r]
    return statistics.median(values) if values else None

configs = sorted({(c, d) for (_, c, d) in runs}, key=lambda k: (k[1] > 1, k[0]))
rows, verdicts = [], []
for clients, depth in configs:
    i = runs.get(("imgd", clients, depth), [])
    r = runs.get(("redis", clients, depth), [])
    i_rps, r_rps = median(i, "requests_per_s"), median(r, "requests_per_s")
    ratio = i_rps / r_rps if i_rps and r_rps else None
    pairs = [a["requests_per_s"] / b["requests_per_s"] for a, b in zip(i, r) if a.get("valid") and b.get("valid")]
    rows.append("| {} | {} | {} | {} / {} / {} | {} | {} / {} | **{}** | {} | {} / {} | {}/{}, {}/{} |".format(
        clients, "no" if depth == 1 else f"depth {depth}",
        num(i_rps, ",.0f"), num(median(i, "p50_ms"), ".3f"), num(median(i, "p99_ms"), ".3f"),
        num(median(i, "p999_ms"), ".3f"),
        num(r_rps, ",.0f"), num(median(r, "p50_ms"), ".3f"), num(median(r, "p99_ms"), ".3f"),
        num(ratio, ".2f"), " ".join(format(p, ".2f") for p in pairs) or "—",
        num(cpu_per_request(i), ".1f"), num(cpu_per_request(r), ".1f"),
        sum(1 for x in i if x.get("valid")), len(i), sum(1 for x in r if x.get("valid")), len(r)))
    if clients == 16:
        mode = "not pipelined" if depth == 1 else f"pipelined (depth {depth})"
        p99 = median(i, "p99_ms")
        # Issue 28's targets: 0.8 of Redis's rate not pipelined, 0.5 at depth 16; p99 within 1 ms.
        rate_target = 0.8 if depth == 1 else 0.5
        rate_met = ratio is not None and ratio >= rate_target
        p99_met = p99 is not None and p99 <= 1
        verdicts.append(f"- 16 clients, {mode}: imgd/Redis requests/s **{num(ratio, '.2f')}** (target ≥ {rate_target:.2f}: "
                        f"{'met' if rate_met else 'MISSED'}); imgd p99 **{num(p99, '.3f')} ms** (target ≤ 1 ms: "
                        f"{'met' if p99_met else 'MISSED'})")
imgd_runs = [x for (system, _, _), xs in runs.items() if system == "imgd" for x in xs]
memory_hits = sum(x.get("memory_hits", 0) for x in imgd_runs)
disk_hits = sum(x.get("disk_hits", 0) for x in imgd_runs)
client_cpu = [x["client_cpu_s"] / x["seconds"] for x in imgd_runs if x.get("valid") and x.get("seconds")]
client_cpu_text = num(statistics.median(client_cpu) if client_cpu else None, ".2f")
body = f"""## Lookup benchmark: imgd `get` hits against Redis GET, Unix sockets

Run {env['DATE']} with `bench/lookup-bench.sh {env['ARGS']}`; {env['KERNEL']}, {env['CPU']}, {env['CORES']} cores,
{env['MEM']}; imgd git {env['IMGD_REV']} (release build, Swift {env['SWIFT_VERSION']}), Redis {env['REDIS_VERSION']};
imgd's cache on {env['FS']}. {env['URLS']} cached images (real PNGs warmed through the spool); each request is `get` with
`"fetch": false` for a random one of them. Redis holds as many keys, values of {env['REPLY_BYTES']} bytes (an imgd reply's
size). Medians of {env['RUNS']} interleaved runs (imgd, Redis, imgd, Redis …) of about {env['SECONDS_PER_RUN']} s each.
The machine was shared with other work: 1-minute load average {env['LOAD_BEFORE']} before the runs, {env['LOAD_AFTER']} after.
imgd's client is `imgd-lookup-bench`, Redis's is `redis-benchmark`: each drives all its connections from one thread
(a `poll` loop; an event loop). Latency is per request, send to reply, in ms (redis-benchmark prints no p99.9).
Every imgd reply was checked to be a hit: {memory_hits:,} from the memory tier, {disk_hits:,} from disk; Redis
counted {int(env['REDIS_HITS'] or 0):,} hits and {env['REDIS_MISSES'] or '?'} misses.
The imgd client used {client_cpu_text} CPU seconds per second (median over runs) of the machine's {env['CORES']}.

| clients | pipelined | imgd req/s | imgd p50 / p99 / p99.9 ms | Redis req/s | Redis p50 / p99 ms | imgd/Redis | per run pair | server CPU µs/request (imgd / Redis) | valid runs (imgd, Redis) |
|---|---|---|---|---|---|---|---|---|---|
""" + "\n".join(rows) + """

Targets (issue 28):
""" + "\n".join(verdicts)
floor_rows = []
for clients, depth in configs:
    f = runs.get(("floor", clients, depth), [])
    if not f:
        continue
    i = runs.get(("imgd", clients, depth), [])
    f_rps, i_rps = median(f, "requests_per_s"), median(i, "requests_per_s")
    floor_rows.append("| {} | {} | {} | {} | {} | {} | **{}** |".format(
        clients, "no" if depth == 1 else f"depth {depth}", num(f_rps, ",.0f"), num(median(f, "p99_ms"), ".3f"),
        num(cpu_per_request(f), ".1f"), num(cpu_per_request(i), ".1f"),
        num(i_rps / f_rps if i_rps and f_rps else None, ".2f")))
if floor_rows:
    body += """

The floor (`--floor`): the same client against `bench/floor/line_floor.c`, a bare single-threaded epoll server that
answers each line with a real hit's reply (its id replaced) and writes all replies of one read at once: no parsing
beyond the id, no lookup. What imgd costs above it is its own work per request.

| clients | pipelined | floor req/s | floor p99 ms | floor CPU µs/request | imgd CPU µs/request | imgd/floor req/s |
|---|---|---|---|---|---|---|
""" + "\n".join(floor_rows)
print(results_md.replace_section(results_path, "lookup-bench", "bench/lookup-bench.sh", body))
PY
}

main() {
    parse_args "$@"
    mkdir -p "$WORK/logs" "$WORK/results"
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    ensure_packages
    build
    serve_images
    start_imgd
    warm_imgd
    [[ $NO_REDIS -eq 1 ]] || start_redis
    [[ $FLOOR -eq 0 ]] || start_floor
    RUNS_TSV=$WORK/results/runs-$(date -u +%Y%m%dT%H%M%SZ).tsv
    : >"$RUNS_TSV"
    local load_before load_after
    load_before=$(cut -d' ' -f1 /proc/loadavg)
    log "runs: clients $CLIENTS, not pipelined and depth $DEPTH, $RUNS rounds (raw results: $RUNS_TSV)"
    run_all
    load_after=$(cut -d' ' -f1 /proc/loadavg)
    if [[ $NO_REDIS -eq 0 ]]; then
        # redis-benchmark does not check its replies: Redis's own counters show they were all hits.
        REDIS_HITS=$(redis-cli -s "$REDIS_SOCKET" info stats | sed -n 's/^keyspace_hits:\([0-9]*\).*/\1/p')
        REDIS_MISSES=$(redis-cli -s "$REDIS_SOCKET" info stats | sed -n 's/^keyspace_misses:\([0-9]*\).*/\1/p')
        if [[ $REDIS_MISSES != 0 ]]; then
            FAILED=1
            log "Redis counted $REDIS_MISSES misses: its GETs were not all hits"
        fi
    fi
    [[ $PERF -eq 1 ]] && profile_imgd
    [[ -z $RUNS_FILE ]] || cp "$RUNS_TSV" "$RUNS_FILE"
    if [[ $WRITE_RESULTS -eq 1 ]]; then
        echo
        write_results "$load_before" "$load_after"
        log "wrote bench/RESULTS.md"
    fi
    if [[ $FAILED -eq 1 ]]; then
        log "some runs FAILED or were not valid (see above and $WORK/logs/)"
        exit 1
    fi
}

main "$@"
