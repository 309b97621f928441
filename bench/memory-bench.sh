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
REPO_DIR=$(dirname "$BENCH_DIR")
WORK=$BENCH_DIR/work/memory     # git-ignored (bench/work): fs image, mount, nginx, logs
PYTHON=${PYTHON:-python3}
URLS=100000
CLAIM_LINES=1000000
PRESSURE_RUNS=5
MEMORY_LIMIT=64MiB
PARTS=warm,claim,pressure
CORPUS_SMALL=2000               # the prefetch benchmark's --quick corpus (shared, kept)
USE_LOOP=1
MOUNTED=0
IMGD_BIN=""
NGINX_PID_FILE=$WORK/nginx/nginx.pid
ORIG_ARGS="$*"

log() { printf '[memory %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
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
    [[ $EUID -eq 0 ]] || die "run as root (apt-get, mount, nginx)"
}

# At exit, whatever happened: a daemon the driver left (by its pid file, and only if it is
# our imgd binary), nginx (by its pid file), the loop mount.
cleanup() {
    local status=$? pid
    if [[ -s $WORK/daemon.pid ]]; then
        pid=$(cat "$WORK/daemon.pid")
        if [[ -n $IMGD_BIN && $(readlink "/proc/$pid/exe" 2>/dev/null) == "$IMGD_BIN" ]]; then
            log "stopping imgd (pid $pid)"
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 100); do [[ -e /proc/$pid ]] || break; sleep 0.1; done
        fi
        rm -f "$WORK/daemon.pid"
    fi
    if [[ -s $NGINX_PID_FILE ]]; then
        pid=$(cat "$NGINX_PID_FILE")
        kill -QUIT "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null
        rm -f "$NGINX_PID_FILE"
    fi
    if [[ $MOUNTED -eq 1 ]]; then
        umount "$WORK/mnt" 2>/dev/null || umount -l "$WORK/mnt" || true
        rm -f "$WORK/fs.img"
    fi
    exit "$status"
}

ensure_packages() {
    local want=()
    command -v nginx >/dev/null || want+=(nginx)
    command -v curl >/dev/null || want+=(curl)
    command -v mkfs.ext4 >/dev/null || want+=(e2fsprogs)
    if [[ ${#want[@]} -gt 0 ]]; then
        log "installing: ${want[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y "${want[@]}" >"$WORK/apt.log" 2>&1 \
            || { apt-get update >>"$WORK/apt.log" 2>&1 && apt-get install -y "${want[@]}" >>"$WORK/apt.log" 2>&1; } \
            || die "apt-get install ${want[*]} failed (see $WORK/apt.log)"
    fi
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

# A fresh journaled ext4 image on a loop device (as in prefetch-bench.sh): / on these machines
# is ext4 without a journal, where creating many files after deleting many is quadratic.
setup_work_area() {
    mkdir -p "$WORK/mnt"
    if [[ $USE_LOOP -eq 1 ]]; then
        mountpoint -q "$WORK/mnt" && umount "$WORK/mnt"
        rm -f "$WORK/fs.img"
        # (a) stores ~URLS × 16 KB; (b)'s list and state database ~150 MB per million lines.
        local size_mib=$(( URLS / 1000 * 20 + CLAIM_LINES / 1000000 * 1024 + 1024 ))
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
        rm -rf "$DATA"
        mkdir -p "$DATA"
        FS_DESC="$(findmnt -n -o FSTYPE,SOURCE -T "$DATA" | head -1) (--no-loop)"
    fi
    log "work area: $DATA — $FS_DESC"
}

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# nginx with the prefetch benchmark's template, serving the small corpus. Query strings are
# ignored by its static file handler: /s/xx/f.png?v=3 is f.png (checked below).
start_nginx() {
    local dir=$WORK/nginx port url
    rm -rf "$dir"
    mkdir -p "$dir"
    port=$(free_port)
    sed -e "s|@PORT@|$port|g" -e "s|@ROOT@|$CORPUS|g" -e "s|@WORK@|$dir|g" \
        "$BENCH_DIR/nginx.conf.template" >"$dir/nginx.conf"
    nginx -t -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" || die "nginx config test failed"
    nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" || die "nginx did not start"
    for _ in $(seq 50); do [[ -s $NGINX_PID_FILE ]] && break; sleep 0.1; done
    [[ -s $NGINX_PID_FILE ]] || die "nginx wrote no pid file"
    "$PYTHON" "$BENCH_DIR/gen_corpus.py" lists --dir "$CORPUS" --base-url "http://127.0.0.1:$port" --out "$WORK/lists"
    url=$(head -1 "$WORK/lists/small.txt")
    cmp -s <(curl -q -sS --fail "$url?v=7") "$CORPUS/${url#http://127.0.0.1:$port/}" \
        || die "nginx does not serve $url?v=7 as $url (see $dir/error.log)"
    log "nginx $(nginx -v 2>&1 | sed 's|.*nginx/||') on 127.0.0.1:$port, pid $(cat "$NGINX_PID_FILE"), root $CORPUS"
}

main() {
    parse_args "$@"
    mkdir -p "$WORK"
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    ensure_packages
    prepare_imgd
    setup_work_area
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
