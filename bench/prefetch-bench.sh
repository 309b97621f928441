#!/usr/bin/env bash
# Prefetch benchmark: `imgd prefetch` and the imgd daemon (a list dropped into its spool)
# against curl, aria2c and wget2, downloading the same link lists of real PNGs from a local
# nginx, with the same parallelism cap, each run into an empty folder. See bench/README.md for
# what it measures and how to read the results.
#
#   bench/prefetch-bench.sh [--quick] [--peers-only] [--no-loop] [--caps 16,64] [--runs R]
#                           [--small N] [--large M] [--sets small,large] [--timeout S]
#                           [--schemes http,https] [--tools imgd,imgd-daemon,curl,aria2c,wget2]
#                           [--no-results] [--runs-file FILE]
#
# Environment: IMGD=/path/to/imgd (otherwise it builds .build/release/imgd), PYTHON (python3),
# IMGD_REF=/path/to/another/imgd (a second imgd, e.g. an older commit's: each imgd tool gets a
# twin, imgd-ref and imgd-daemon-ref, run right beside it in every round; bench/compare.sh).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=bench
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work            # git-ignored: corpus, lists, logs, raw results, fs image

# Settings (see usage).
SMALL=20000
LARGE=200
RUNS=3
CAPS=16
SETS=small,large
SCHEMES=http
WANT_TOOLS=imgd,imgd-daemon,curl,aria2c,wget2
QUICK=0
PEERS_ONLY=0
USE_LOOP=1
RUN_TIMEOUT=1800
WRITE_RESULTS=1
RUNS_FILE=""
ORIG_ARGS="$*"

# State shared by the functions below.
NOTES=()                        # caveats that go into the results header
TOOLS=()                        # tools that will run, in interleaving order
IMGD_BIN=""
IMGD_DESC="skipped"
IMGD_REF_BIN=""                 # IMGD_REF, made absolute: the twin tools' binary
MOUNTED=0
CHILD_PID=""                    # the run in progress (timeout's pid), for the exit trap
DAEMON_PID=""                   # the imgd daemon of the run in progress, for the exit trap
NGINX_PID_FILE=$WORK/nginx/nginx.pid
OUT_ROOT=""
FS_DESC=""
PORT=""
TLS_PORT=""                     # the https + HTTP/2 server (--schemes …https)
PROBE_PORT=""                   # the same, with an access log: the protocol check
TLS_DIR=$WORK/tls               # the throwaway CA and server certificate
CA_FILE=$TLS_DIR/ca.pem
declare -A SET_FILES SET_BYTES
declare -A LISTS_OF             # scheme -> folder of that scheme's lists

note() { NOTES+=("$*"); log "note: $*"; }

usage() {
    script_header 11
    cat <<'EOF'

Options:
  --quick        2,000 small + 20 large images and 2 runs (smoke test)
  --peers-only   skip imgd (no build); it is also skipped, with a note, when it cannot be built
  --no-loop      write downloads to a plain folder under bench/work instead of a journaled
                 ext4 image on a loop device (the results name the filesystem either way)
  --caps LIST    parallelism caps, comma-separated (default 16)
  --runs R       interleaved runs per tool (default 3)
  --small N      number of small images (default 20000)
  --large M      number of large images (default 200)
  --sets LIST    which sets to run: small,large (default both)
  --timeout S    kill a run after S seconds and count it as failed (default 1800)
  --schemes LIST http, https or http,https (default http). https: nginx also listens with TLS
                 and HTTP/2 (a throwaway CA made by openssl in bench/work/tls), every tool
                 trusts that CA only, and both schemes' runs are interleaved round by round.
                 With https the results go to their own section of RESULTS.md (prefetch-https),
                 so a plain-only run's section (prefetch-bench) is left as it was.
  --tools LIST   which tools to run, among imgd,imgd-daemon,curl,aria2c,wget2 (default all;
                 aria2c, which has no HTTP/2, never runs over https), and the floors (only when
                 named): floor, floor-digest, floor-digest-2t, a bare libcurl multi loop
                 (bench/floor/libcurl_floor.c) saving like curl; -digest adds SHA-256 of every
                 byte and an atomic publish (temporary name, rename); -2t hashes and writes on a
                 second thread, beside the receive
  --no-results   print the table but leave bench/RESULTS.md as it is (bench/compare.sh)
  --runs-file F  also copy the per-run records (the raw table report.py reads) to F

With IMGD_REF set, imgd and imgd-daemon each get a twin (imgd-ref, imgd-daemon-ref) running
that binary with the same options, right after it in odd rounds and right before it in even
ones (A B, B A, A B …), so each round is a pair whose ratio a drift of the machine hardly moves.
EOF
}

parse_args() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --quick) QUICK=1; SMALL=2000; LARGE=20; RUNS=2 ;;
            --peers-only) PEERS_ONLY=1 ;;
            --no-loop) USE_LOOP=0 ;;
            --caps) CAPS=$2; shift ;;
            --runs) RUNS=$2; shift ;;
            --small) SMALL=$2; shift ;;
            --large) LARGE=$2; shift ;;
            --sets) SETS=$2; shift ;;
            --timeout) RUN_TIMEOUT=$2; shift ;;
            --schemes) SCHEMES=$2; shift ;;
            --tools) WANT_TOOLS=$2; shift ;;
            --no-results) WRITE_RESULTS=0 ;;
            --runs-file) RUNS_FILE=$2; shift ;;
            -h|--help) usage; exit 0 ;;
            *) usage >&2; die "unknown option: $1" ;;
        esac
        shift
    done
    [[ $CAPS =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--caps wants numbers like 16,64"
    [[ $RUNS =~ ^[1-9][0-9]*$ && $SMALL =~ ^[1-9][0-9]*$ && $LARGE =~ ^[1-9][0-9]*$ ]] \
        || die "--runs, --small and --large want positive numbers"
    [[ $SETS =~ ^(small|large)(,(small|large))?$ ]] || die "--sets wants small, large or small,large"
    [[ $SCHEMES =~ ^(http|https)(,(http|https))?$ ]] || die "--schemes wants http, https or http,https"
    [[ $WANT_TOOLS =~ ^(imgd|imgd-daemon|curl|aria2c|wget2|floor|floor-digest|floor-digest-2t)(,(imgd|imgd-daemon|curl|aria2c|wget2|floor|floor-digest|floor-digest-2t))*$ ]] \
        || die "--tools wants names among imgd,imgd-daemon,curl,aria2c,wget2,floor,floor-digest,floor-digest-2t"
    require_root "apt-get, mount, nginx"
}

# --- 1. Packages -------------------------------------------------------------------------

# Installs the Debian packages whose commands are missing. `time` is checked by path:
# `command -v time` finds the shell keyword, not GNU time (which has -f and %M).
ensure_packages() {
    local want=()
    command -v nginx >/dev/null || want+=(nginx)
    command -v aria2c >/dev/null || want+=(aria2)
    command -v curl >/dev/null || want+=(curl)
    command -v mkfs.ext4 >/dev/null && command -v dumpe2fs >/dev/null || want+=(e2fsprogs)
    [[ -x /usr/bin/time ]] || want+=(time)
    command -v timeout >/dev/null || want+=(coreutils)
    command -v openssl >/dev/null || want+=(openssl)
    command -v findmnt >/dev/null || want+=(util-linux)
    if ! command -v wget2 >/dev/null; then
        # wget2 is optional: Debian 12 has it, older releases do not.
        if apt-cache show wget2 >/dev/null 2>&1; then want+=(wget2); fi
    fi
    apt_install "$WORK/logs/apt.log" "${want[@]}"
    command -v "$PYTHON" >/dev/null || die "$PYTHON not found"
}

# The bare libcurl loop of the floor tools, built with the system's libcurl and OpenSSL.
build_floor() {
    command -v cc >/dev/null || apt_install "$WORK/logs/apt.log" gcc
    FLOOR_BIN=$WORK/libcurl-floor
    cc -O2 -o "$FLOOR_BIN" "$BENCH_DIR/floor/libcurl_floor.c" -lcurl -lcrypto -lpthread \
        || die "could not build bench/floor/libcurl_floor.c (libcurl4-openssl-dev, libssl-dev)"
}

# --- 2. Work area ------------------------------------------------------------------------

# Describes the filesystem holding $1: type, device, and (for ext2/3/4) whether it has a
# journal. This matters here: / on these machines is ext4 without a journal, where deleting
# and re-creating ~20,000 files turns quadratic (see /work/shared/TOOLCHAIN.md).
describe_fs() {
    local dir=$1 fstype source statf journal="" kname
    fstype=$(findmnt -n -o FSTYPE -T "$dir" | head -1)
    source=$(findmnt -n -o SOURCE -T "$dir" | head -1)
    statf=$(stat -f -c %T "$dir")
    if [[ $fstype == ext[234] ]]; then
        # The kernel's name for the device (vda, loop0): /proc/fs/jbd2/NAME-8 exists while a
        # journaled ext3/4 filesystem on it is mounted. That answers even where the device
        # node cannot be opened (here: `dumpe2fs /dev/vda` gets "Operation not permitted").
        kname=$(basename "$(readlink -f "/sys/dev/block/$(findmnt -n -o MAJ:MIN -T "$dir" | head -1 | tr -d " ")")")
        if dumpe2fs -h "$source" 2>/dev/null | grep -q '^Filesystem features:.*has_journal'; then
            journal=", with a journal (dumpe2fs: has_journal)"
        elif dumpe2fs -h "$source" >/dev/null 2>&1; then
            journal=", WITHOUT a journal (dumpe2fs: no has_journal)"
        elif compgen -G "/proc/fs/jbd2/$kname-*" >/dev/null; then
            journal=", with a journal (/proc/fs/jbd2/$kname-*)"
        else
            journal=", WITHOUT a journal (no /proc/fs/jbd2/$kname-* entry; dumpe2fs cannot open $source)"
        fi
    fi
    printf '%s on %s (stat -f: %s)%s' "$fstype" "$source" "$statf" "$journal"
}

# By default downloads land on a fresh journaled ext4 image on a loop device, so the numbers
# resemble an ordinary server's disk rather than this machine's journal-less /.
setup_work_area() {
    if [[ $USE_LOOP -eq 1 ]]; then
        mount_work_fs "$WORK" 4G
        OUT_ROOT=$WORK/mnt/out
    else
        OUT_ROOT=$WORK/out
        note "--no-loop: downloads written to a plain folder on $(describe_fs "$WORK")"
    fi
    mkdir -p "$OUT_ROOT"
    FS_DESC=$(describe_fs "$OUT_ROOT")
    [[ $USE_LOOP -eq 1 ]] && FS_DESC="4 GiB image on a loop device: $FS_DESC"
    log "work area: $OUT_ROOT — $FS_DESC"
}

# Runs at exit, whatever happened: stop our nginx (by its pid file only) and unmount.
cleanup() {
    local status=$?
    if [[ -n $CHILD_PID ]] && kill -0 "$CHILD_PID" 2>/dev/null; then
        log "stopping the run in progress"
        kill -TERM "$CHILD_PID" 2>/dev/null || true   # timeout passes it on to the tool
        wait "$CHILD_PID" 2>/dev/null || true
    fi
    if [[ -n $DAEMON_PID ]]; then
        log "stopping the imgd daemon (pid $DAEMON_PID)"
        stop_daemon "$DAEMON_PID" || true
    fi
    nginx_stop "$WORK/nginx"
    unmount_work_fs "$WORK"
    exit "$status"
}

# --- imgd --------------------------------------------------------------------------------

# Decides whether imgd runs: IMGD if set, else a release build. While imgd is being written it
# may not build yet; then it is skipped with a note rather than stopping the peers' runs.
prepare_imgd() {
    if [[ $PEERS_ONLY -eq 1 ]]; then
        IMGD_DESC="skipped (--peers-only)"
        note "imgd skipped (--peers-only)"
        return
    fi
    local bin
    if ! imgd_binary "$WORK/logs/build.log"; then
        IMGD_BIN=""
        IMGD_DESC="skipped (build failed)"
        note "imgd skipped: the release build failed (see bench/work/logs/build.log)"
        return
    fi
    bin=$IMGD_BIN
    IMGD_BIN=""
    if [[ ! -x $bin ]]; then
        IMGD_DESC="skipped (no binary at $bin)"
        note "imgd skipped: no executable at $bin"
        return
    fi
    IMGD_BIN=$bin
    IMGD_DESC="$bin (git $(imgd_revision))"
    if [[ -n ${IMGD_REF:-} ]]; then
        [[ -x $IMGD_REF ]] || die "IMGD_REF: no executable at $IMGD_REF"
        IMGD_REF_BIN=$(readlink -f "$IMGD_REF")
    fi
    if wanted_tool imgd; then
        TOOLS+=(imgd)
        [[ -n $IMGD_REF_BIN ]] && TOOLS+=(imgd-ref)
    fi
    if wanted_tool imgd-daemon; then
        TOOLS+=(imgd-daemon)
        [[ -n $IMGD_REF_BIN ]] && TOOLS+=(imgd-daemon-ref)
    fi
    return 0
}

# The imgd binary a tool runs: IMGD_REF's for the twins (imgd-ref, imgd-daemon-ref).
tool_binary() { if [[ $1 == *-ref ]]; then printf '%s' "$IMGD_REF_BIN"; else printf '%s' "$IMGD_BIN"; fi; }

# Whether a tool is the daemon path (imgd-daemon or its twin).
is_daemon_tool() { [[ $1 == imgd-daemon || $1 == imgd-daemon-ref ]]; }

# The tools of round RUN in their order, into ROUND_TOOLS: TOOLS as they are, except that with
# IMGD_REF each imgd twin pair is swapped in even rounds (imgd imgd-ref, then imgd-ref imgd), so
# neither binary always runs second (after the other's writeback, with the corpus warmer).
round_tools() {
    ROUND_TOOLS=("${TOOLS[@]}")
    [[ -n $IMGD_REF_BIN && $(($1 % 2)) -eq 0 ]] || return 0
    local i
    for ((i = 0; i + 1 < ${#ROUND_TOOLS[@]}; i++)); do
        if [[ ${ROUND_TOOLS[i + 1]} == "${ROUND_TOOLS[i]}-ref" ]]; then
            ROUND_TOOLS[i + 1]=${ROUND_TOOLS[i]}
            ROUND_TOOLS[i]=${ROUND_TOOLS[i]}-ref
            i=$((i + 1))
        fi
    done
}

wanted_tool() { [[ ,$WANT_TOOLS, == *,$1,* ]]; }
wanted_scheme() { [[ ,$SCHEMES, == *,$1,* ]]; }

# Whether TOOL runs over SCHEME. aria2c has no HTTP/2, and its small-set time is fsync latency
# (about 32 s a run here) that says nothing about TLS: it is left out of https.
runs_over() { [[ $2 == http || $1 != aria2c ]]; }

# --- 3. Corpus and lists -----------------------------------------------------------------

# The corpus is kept per size (bench/work/corpus/sN-lM), so --quick and full runs do not
# regenerate each other's; gen_corpus.py skips the work when the manifest matches.
prepare_corpus() {
    CORPUS=$WORK/corpus/s$SMALL-l$LARGE
    MANIFEST=$CORPUS/manifest.tsv
    "$PYTHON" "$BENCH_DIR/gen_corpus.py" generate --dir "$CORPUS" --small "$SMALL" --large "$LARGE"
    local set prefix
    for set in small large; do
        prefix=${set:0:1}/
        SET_FILES[$set]=$(awk -F'\t' -v p="$prefix" 'index($1, p) == 1 { n++ } END { print n + 0 }' "$MANIFEST")
        SET_BYTES[$set]=$(awk -F'\t' -v p="$prefix" 'index($1, p) == 1 { b += $2 } END { printf "%d", b }' "$MANIFEST")
    done
}

# Reads a set's files so nginx serves them from the page cache. Done before every run (not
# timed): on these machines idle files leave the page cache after about a minute.
warm_corpus() {
    find "$CORPUS/${1:0:1}" -type f -print0 | xargs -0 cat >/dev/null
}

# --- 4. nginx ----------------------------------------------------------------------------

# A throwaway CA and a server certificate it signs (SAN IP:127.0.0.1 and DNS:localhost), made
# fresh each run in bench/work/tls. Every tool is told to trust ca.pem only (imgd --ca-file,
# curl --cacert, wget2 --ca-certificate); the machine's trust store is never touched.
# ECDSA P-256, as most public sites serve today (an RSA-2048 handshake costs more CPU).
make_certificates() {
    rm -rf "$TLS_DIR"
    mkdir -p "$TLS_DIR"
    (
        cd "$TLS_DIR"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
            -subj "/CN=imgd bench CA" -keyout ca.key -out ca.pem \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign"
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -subj "/CN=localhost" -keyout server.key -out server.csr
        printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
            "extendedKeyUsage=serverAuth" >server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile server.ext -out server.pem
    ) >"$WORK/logs/openssl.log" 2>&1 || die "openssl could not make the test certificates (see $WORK/logs/openssl.log)"
}

# The https server blocks (bench/work/tls.conf, included into nginx's http block): the timed one
# on TLS_PORT, without an access log like the plain server, and a protocol probe on PROBE_PORT,
# the same but logging each request's protocol (HTTP/2.0 or HTTP/1.1), TLS version, connection
# number and User-Agent. Sessions are cached so a tool that reconnects can resume.
write_tls_conf() {
    local conf=$1
    cat >"$conf" <<EOF
ssl_certificate $TLS_DIR/server.pem;
ssl_certificate_key $TLS_DIR/server.key;
ssl_protocols TLSv1.2 TLSv1.3;
ssl_session_cache shared:bench:10m;
log_format bench_protocol '\$server_protocol \$ssl_protocol \$connection "\$http_user_agent"';

server {
    listen 127.0.0.1:$TLS_PORT ssl http2 backlog=4096;
    server_name localhost;
    root $CORPUS;
    location / { }
}

server {
    listen 127.0.0.1:$PROBE_PORT ssl http2;
    server_name localhost;
    root $CORPUS;
    access_log $WORK/nginx/protocol.log bench_protocol;
    location / { }
}
EOF
}

start_nginx() {
    local dir=$WORK/nginx extra=""
    if wanted_scheme https; then
        make_certificates
        TLS_PORT=$(free_port)
        PROBE_PORT=$(free_port)
        while [[ $PROBE_PORT == "$TLS_PORT" ]]; do PROBE_PORT=$(free_port); done
        extra=$WORK/tls.conf
        write_tls_conf "$extra"
    fi
    nginx_start "$dir" "$CORPUS" "$extra"
    PORT=$NGINX_PORT
    [[ $PORT != "$TLS_PORT" && $PORT != "$PROBE_PORT" ]] || die "free_port gave the same port twice; run again"
    LISTS_OF[http]=$WORK/lists
    "$PYTHON" "$BENCH_DIR/gen_corpus.py" lists --dir "$CORPUS" --base-url "http://127.0.0.1:$PORT" --out "${LISTS_OF[http]}"
    if wanted_scheme https; then
        LISTS_OF[https]=$WORK/lists-https
        "$PYTHON" "$BENCH_DIR/gen_corpus.py" lists --dir "$CORPUS" --base-url "https://127.0.0.1:$TLS_PORT" \
            --out "${LISTS_OF[https]}"
        "$PYTHON" "$BENCH_DIR/gen_corpus.py" lists --dir "$CORPUS" --base-url "https://127.0.0.1:$PROBE_PORT" \
            --out "$WORK/lists-probe"
    fi
    # One request per set and scheme proves the server reads the corpus (permissions, root path)
    # and, over https, that curl trusts the certificate and gets HTTP/2.
    local set url scheme proto
    for scheme in ${SCHEMES//,/ }; do
        for set in small large; do
            url=$(head -1 "${LISTS_OF[$scheme]}/$set.txt")
            if [[ $scheme == http ]]; then
                curl -q -sS --fail -o /dev/null "$url" || die "nginx does not serve $url (see $dir/error.log)"
            else
                proto=$(curl -q -sS --fail --cacert "$CA_FILE" --http2 -o /dev/null -w '%{http_version}' "$url") \
                    || die "nginx does not serve $url (see $dir/error.log)"
                [[ $proto == 2 ]] || die "curl --http2 got HTTP/$proto from $url, not HTTP/2"
            fi
        done
    done
    log "nginx $(nginx_version) on 127.0.0.1:$PORT (http)$([[ -n $TLS_PORT ]] && echo ", :$TLS_PORT (https + h2), :$PROBE_PORT (https + h2, logged)"), pid $(cat "$NGINX_PID_FILE"), root $CORPUS"
}

# --- 5. Runs -----------------------------------------------------------------------------

# The command line of one tool for one run, into the array CMD. Each peer gets the options
# that make it save each URL under the URL's path and ignore user config files (curlrc,
# aria2.conf, wget2rc) so a stray home-directory setting cannot change the measurement.
# Over https (SCHEME, set by run_one, with LISTS pointing at that scheme's lists) each trusts
# the bench CA only, and curl is asked for HTTP/2 (imgd's libcurl and wget2 offer h2 by ALPN
# on their own).
tool_command() {
    local tool=$1 set=$2 cap=$3 out=$4
    local tls=()
    case $tool in
        imgd|imgd-ref)
            [[ $SCHEME == https ]] && tls=(--ca-file "$CA_FILE")
            CMD=("$(tool_binary "$tool")" prefetch "$LISTS/$set.txt" --cache "$out"
                 --max-parallel "$cap" --max-per-host "$cap" "${tls[@]}") ;;
        curl)
            [[ $SCHEME == https ]] && tls=(--cacert "$CA_FILE" --http2)
            # -q must come first (skip ~/.curlrc). The config holds url/output pairs; outputs
            # are relative to --output-dir; --create-dirs makes s/xx/ folders. curl 7.88 still
            # draws its parallel progress meter under --silent: --no-progress-meter stops it.
            CMD=(curl -q --parallel --parallel-max "$cap" -Z --fail --no-progress-meter
                 --create-dirs --output-dir "$out" --config "$LISTS/$set.curl" "${tls[@]}") ;;
        aria2c)
            # -x1: one connection per download (no splitting), -j: downloads at once. No
            # console readout (a status line a second); the final result table stays in the log.
            # aria2c fsyncs every finished file and its .aria2 control file, on its one thread.
            CMD=(aria2c --no-conf -j "$cap" -x1 -i "$LISTS/$set.aria2" -d "$out"
                 --allow-overwrite=true --auto-file-renaming=false
                 --console-log-level=error --summary-interval=0 --show-console-readout=false) ;;
        floor|floor-digest|floor-digest-2t)
            local extra=()
            [[ $tool == floor-digest* ]] && extra+=(--digest --publish)
            [[ $tool == floor-digest-2t ]] && extra+=(--hash-thread)
            [[ $SCHEME == https ]] && tls=(--cacert "$CA_FILE" --http2)
            CMD=("$FLOOR_BIN" --parallel "$cap" --out "$out" "${extra[@]}" "${tls[@]}" "$LISTS/$set.txt") ;;
        wget2)
            # -x -nH: save http://host/s/xx/f.png as OUT/s/xx/f.png (default: OUT/f.png).
            # --no-hsts/--no-hpkp: no database files in $HOME. (TLS session resumption, which
            # would keep a file there, is off by default.)
            [[ $SCHEME == https ]] && tls=(--ca-certificate="$CA_FILE")
            CMD=(wget2 --no-config --max-threads="$cap" -i "$LISTS/$set.txt" -P "$out" -x -nH -nv
                 --no-hsts --no-hpkp "${tls[@]}") ;;
        *) die "unknown tool $tool" ;;
    esac
}

# The state letter of a process (R, S, Z …) from /proc, empty when it is gone. `kill -0`
# cannot tell: it succeeds on a zombie child that has not been waited for yet.
proc_state() { sed -n 's/^.*) \(.\).*$/\1/p' "/proc/$1/stat" 2>/dev/null || true; }

# SIGTERM to the daemon, then waits (imgd promises to stop within 5 s; SIGKILL after 15 s).
# Returns the daemon's exit status (137 after SIGKILL).
stop_daemon() {
    local pid=$1 rc=0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 150); do
        [[ $(proc_state "$pid") == Z || -z $(proc_state "$pid") ]] && break
        sleep 0.1
    done
    if [[ $(proc_state "$pid") != Z && -n $(proc_state "$pid") ]]; then
        log "imgd (pid $pid) did not stop within 15 s of SIGTERM: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || rc=$?
    DAEMON_PID=""
    return "$rc"
}

# The daemon path, one run: start `imgd` (the daemon) on an empty spool, cache and state in
# OUT, untimed, and wait until its control socket answers a ping. Timed (by imgd_daemon.py):
# from just before the list is written to OUT/spool/.SET.txt.tmp and renamed to SET.txt until
# SET.txt appears in OUT/spool/done/ (or failed/), found by a stat every 5 ms. Right then the
# daemon's CPU time (utime+stime of /proc/PID/stat, its whole life: start-up included, as
# `time` counts imgd prefetch's) and peak RSS (VmHWM) are read; then SIGTERM, untimed; a
# non-zero exit status fails the run. Sets wall user sys rss rc. A sixth argument names
# another imgd binary (the twin imgd-daemon-ref's).
run_daemon() {
    local set=$1 cap=$2 out=$3 logf=$4 tfile=$5 bin=${6:-$IMGD_BIN}
    mkdir -p "$out/spool" "$out/cache" "$out/state"
    local tls=()
    [[ $SCHEME == https ]] && tls=(--ca-file "$CA_FILE")
    # shellcheck disable=SC2046 # courtesy_off prints two words or none
    "$bin" --spool "$out/spool" --cache "$out/cache" --state "$out/state" --socket "$out/imgd.sock" \
        --max-parallel "$cap" --max-per-host "$cap" "${tls[@]}" $(courtesy_off "$bin") >"$logf" 2>&1 </dev/null &
    DAEMON_PID=$!
    local pid=$DAEMON_PID outcome="" result drc=0
    rc=0
    if "$PYTHON" "$BENCH_DIR/imgd_daemon.py" wait-socket --socket "$out/imgd.sock" --pid "$pid" \
        --timeout 60 >/dev/null 2>>"$logf"; then
        result=$("$PYTHON" "$BENCH_DIR/imgd_daemon.py" drop --spool "$out/spool" --list "$LISTS/$set.txt" \
                 --name "$set.txt" --pid "$pid" --timeout "$RUN_TIMEOUT" 2>>"$logf") || rc=$?
        read -r wall user sys rss outcome <<<"$result" || true
        echo "$result" >"$tfile"
    else
        rc=1
        outcome="the socket never answered"
    fi
    stop_daemon "$pid" || drc=$?
    case $outcome in
        done) [[ $drc -eq 0 ]] || { rc=$drc; outcome="exit status $drc after SIGTERM"; } ;;
        timeout) rc=124 ;;
        failed) rc=1; outcome="the list landed in spool/failed/ (see its report.json)" ;;
        *) [[ $rc -ne 0 ]] || rc=1 ;;
    esac
    DAEMON_OUTCOME=$outcome
}

# One timed run. Untimed before it: empty the output folder, flush the previous run's
# writes (sync), warm the set's corpus. Untimed after it: full verification. Appends a line
# to $RUNS_TSV; a run that fails (exit status, timeout or verification) is marked FAILED.
run_one() {
    local set=$1 cap=$2 tool=$3 run=$4
    SCHEME=$5
    LISTS=${LISTS_OF[$SCHEME]}
    local out=$OUT_ROOT/run
    local tag=$set-$SCHEME-cap$cap-$tool-run$run
    local tfile=$WORK/logs/$tag.time logf=$WORK/logs/$tag.log
    rm -rf "$out"
    mkdir -p "$out"
    sync
    warm_corpus "$set"
    local rc=0 wall=0 user=0 sys=0 rss=0 load1
    # The machine is shared: the 1-minute load average right before each run goes into its record.
    load1=$(cut -d' ' -f1 /proc/loadavg)
    DAEMON_OUTCOME=""
    if is_daemon_tool "$tool"; then
        run_daemon "$set" "$cap" "$out" "$logf" "$tfile" "$(tool_binary "$tool")"
    else
        tool_command "$tool" "$set" "$cap" "$out"
        # timeout outside time: time measures the tool itself; timeout kills its process group.
        # Started in the background and waited for, so Ctrl-C/SIGTERM reach our trap at once
        # (timeout puts the tool in its own process group, out of reach of the terminal's Ctrl-C).
        timeout -k 10 "$RUN_TIMEOUT" /usr/bin/time -f '%e %U %S %M' -o "$tfile" \
            "${CMD[@]}" >"$logf" 2>&1 </dev/null &
        CHILD_PID=$!
        wait "$CHILD_PID" || rc=$?
        CHILD_PID=""
        # GNU time puts "Command exited with non-zero status N" before the numbers: use the last line.
        if [[ -s $tfile ]]; then read -r wall user sys rss < <(tail -1 "$tfile") || true; fi
    fi
    local status=ok note verdict vrc=0
    if [[ $tool == imgd || $tool == imgd-ref ]]; then
        verdict=$("$PYTHON" "$BENCH_DIR/verify_run.py" cache --manifest "$MANIFEST" --set "$set" \
                  --dir "$out" --list "$LISTS/$set.txt") || vrc=$?
    elif is_daemon_tool "$tool"; then
        verdict=$("$PYTHON" "$BENCH_DIR/verify_run.py" cache --manifest "$MANIFEST" --set "$set" \
                  --dir "$out/cache" --list "$LISTS/$set.txt" \
                  --report "$out/spool/done/$set.txt.report.json") || vrc=$?
    else
        verdict=$("$PYTHON" "$BENCH_DIR/verify_run.py" paths --manifest "$MANIFEST" --set "$set" \
                  --dir "$out") || vrc=$?
    fi
    note=$verdict
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        status=FAILED; note="timed out after ${RUN_TIMEOUT}s; $verdict"
    elif [[ -n $DAEMON_OUTCOME && $rc -ne 0 ]]; then
        status=FAILED; note="$DAEMON_OUTCOME (log: bench/work/logs/$tag.log); $verdict"
    elif [[ $rc -ne 0 ]]; then
        status=FAILED; note="exit status $rc (log: bench/work/logs/$tag.log); $verdict"
    elif [[ $vrc -ne 0 ]]; then
        status=FAILED
    fi
    if [[ $status == ok ]]; then
        log "$(awk -v s="$set/$SCHEME" -v c="$cap" -v t="$tool" -v r="$run/$RUNS" -v w="$wall" -v u="$user" \
            -v y="$sys" -v m="$rss" -v v="$verdict" 'BEGIN {
                printf "%-11s cap %-3s %-11s run %s: %7.2f s  cpu %6.2f s  rss %6.1f MiB  %s", s, c, t, r, w, u + y, m / 1024, v }')"
    else
        log "$(printf '%-11s cap %-3s %-11s run %s/%s: FAILED — %s' "$set/$SCHEME" "$cap" "$tool" "$run" "$RUNS" "$note")"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$set" "$SCHEME" "$cap" "$tool" "$run" \
        "$status" "$wall" "$user" "$sys" "$rss" "${SET_FILES[$set]}" "${SET_BYTES[$set]}" "$load1" \
        "${note//$'\t'/ }" >>"$RUNS_TSV"
}

# Interleaves the tools (imgd imgd-daemon curl aria2c wget2 imgd …), and with --schemes
# http,https the schemes within each round (every tool over http, then over https), so slow
# drifts of the machine (page cache, thermal, neighbours) spread over all of them instead of
# favouring one.
run_all() {
    local set cap run tool scheme
    for set in ${SETS//,/ }; do
        for cap in ${CAPS//,/ }; do
            log "set $set (${SET_FILES[$set]} files, $((SET_BYTES[$set] / 1000000)) MB), cap $cap, $SCHEMES: ${TOOLS[*]} × $RUNS"
            for run in $(seq "$RUNS"); do
                round_tools "$run"
                for scheme in ${SCHEMES//,/ }; do
                    for tool in "${ROUND_TOOLS[@]}"; do
                        runs_over "$tool" "$scheme" || continue
                        run_one "$set" "$cap" "$tool" "$run" "$scheme"
                    done
                done
            done
        done
    done
    rm -rf "$OUT_ROOT/run"
}

# Which protocol each tool really speaks over https, from nginx's own log: untimed, before the
# timed runs, each tool fetches the first PROBE_URLS small images (at the first cap) from the
# logged https server (PROBE_PORT), and the log lines it added are counted by protocol, TLS
# version and connection. Writes a Markdown table to $1; a tool that did not get HTTP/2 is named
# in the notes. The timed server logs nothing, like the plain one.
PROBE_URLS=400
probe_protocols() {
    local table=$1 tool cap=${CAPS%%,*} out=$OUT_ROOT/probe logf=$WORK/nginx/protocol.log
    local before after summary
    SCHEME=https
    LISTS=$WORK/lists-probe-cut
    mkdir -p "$LISTS"
    head -n "$PROBE_URLS" "$WORK/lists-probe/small.txt" >"$LISTS/small.txt"
    head -n $((PROBE_URLS * 2)) "$WORK/lists-probe/small.curl" >"$LISTS/small.curl"
    {
        echo "| tool | requests logged | protocol (nginx \$server_protocol) | TLS | connections used |"
        echo "|---|---|---|---|---|"
    } >"$table"
    for tool in "${TOOLS[@]}"; do
        runs_over "$tool" https || continue
        rm -rf "$out"
        mkdir -p "$out"
        before=$(wc -l <"$logf" 2>/dev/null || echo 0)
        if is_daemon_tool "$tool"; then
            run_daemon small "$cap" "$out" "$WORK/logs/probe-$tool.log" "$WORK/logs/probe-$tool.time" \
                "$(tool_binary "$tool")" || true
        else
            tool_command "$tool" small "$cap" "$out"
            timeout -k 10 120 "${CMD[@]}" >"$WORK/logs/probe-$tool.log" 2>&1 </dev/null || true
        fi
        # nginx writes a request's log line when the request ends; give it a moment to catch up.
        for _ in $(seq 20); do
            after=$(wc -l <"$logf" 2>/dev/null || echo 0)
            [[ $((after - before)) -ge $PROBE_URLS ]] && break
            sleep 0.1
        done
        summary=$(tail -n +"$((before + 1))" "$logf" | awk '
            { n++; proto[$1]++; tls[$2]++; conn[$3] = 1 }
            END {
                p = ""; for (k in proto) p = p (p ? ", " : "") k " ×" proto[k]
                t = ""; for (k in tls) t = t (t ? ", " : "") k
                c = 0; for (k in conn) c++
                printf "%d\t%s\t%s\t%d", n, p, t, c
            }')
        IFS=$'\t' read -r n protos tlsv conns <<<"$summary"
        echo "| $tool | ${n:-0} of $PROBE_URLS | ${protos:-none} | ${tlsv:-—} | ${conns:-0} |" >>"$table"
        log "protocol probe: $tool: ${n:-0} requests, ${protos:-none}, ${tlsv:-}, ${conns:-0} connections"
        [[ ${protos:-} == "HTTP/2.0 ×"* && $protos != *,* ]] || note "$tool did not use HTTP/2 alone over https (protocol probe: ${protos:-no requests})"
    done
    rm -rf "$out"
}

# --- 7. Report ---------------------------------------------------------------------------

write_meta() {
    local meta=$1 wget2_v="not installed"
    command -v wget2 >/dev/null && wget2_v=$(wget2 --version 2>/dev/null | head -1 | awk '{print $3}')
    # Over https the libraries matter: curl's TLS and HTTP/2 (nghttp2), wget2's (GnuTLS, +http2).
    if wanted_scheme https && command -v wget2 >/dev/null; then
        wget2_v+=" ($(wget2 --version 2>/dev/null | grep -o -E '\+ssl/[a-z]+|[+-]http2' | tr '\n' ' ' | sed 's/ $//'))"
    fi
    {
        echo "date=$START_DATE"
        echo "args=$ORIG_ARGS"
        echo "kernel=$(uname -r)"
        echo "cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
        echo "cores=$(nproc)"
        echo "mem=$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
        echo "fs=$FS_DESC"
        echo "small=$SMALL"
        echo "large=$LARGE"
        echo "small_mb=$((SET_BYTES[small] / 1000000))"
        echo "large_mb=$((SET_BYTES[large] / 1000000))"
        echo "runs=$RUNS"
        echo "caps=$CAPS"
        echo "quick=$QUICK"
        echo "tools=${TOOLS[*]}"
        echo "imgd=$IMGD_DESC"
        [[ -z $IMGD_REF_BIN ]] || echo "imgd_ref=$IMGD_REF_BIN"
        if wanted_scheme https; then
            echo "curl=$(curl --version | head -1 | awk '{print $2}') ($(curl --version | head -1 | grep -o -E 'OpenSSL/[0-9.]+|nghttp2/[0-9.]+' | paste -sd ' '))"
        else
            echo "curl=$(curl --version | head -1 | awk '{print $2}')"
        fi
        echo "schemes=$SCHEMES"
        echo "load_before=$LOAD_BEFORE"
        echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)"
        echo "aria2c=$(aria2c --version | head -1 | awk '{print $3}')"
        echo "wget2=$wget2_v"
        echo "nginx=$(nginx_version)"
        local joined="" n
        for n in "${NOTES[@]}"; do joined+="${joined:+ | }$n"; done
        echo "notes=$joined"
    } >"$meta"
}

main() {
    parse_args "$@"
    mkdir -p "$WORK/logs"
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    ensure_packages
    TOOLS=()
    if wanted_tool imgd || wanted_tool imgd-daemon; then prepare_imgd; fi
    wanted_tool curl && TOOLS+=(curl)
    wanted_tool aria2c && TOOLS+=(aria2c)
    if wanted_tool wget2; then
        if command -v wget2 >/dev/null; then TOOLS+=(wget2); else note "wget2 is not available: not run"; fi
    fi
    local floor
    for floor in floor floor-digest floor-digest-2t; do
        wanted_tool $floor && TOOLS+=($floor)
    done
    [[ ${TOOLS[*]} != *floor* ]] || build_floor
    if wanted_scheme https && wanted_tool aria2c; then
        note "aria2c runs over http only: it has no HTTP/2, and its small-set time is fsync latency (see below), which says nothing about TLS"
    fi
    local cap
    for cap in ${CAPS//,/ }; do
        [[ $cap -le 300 ]] || note "curl clamps --parallel-max to 300: its cap-$cap runs use 300"
    done
    setup_work_area
    prepare_corpus
    start_nginx
    local stamp
    stamp=$(date -u +%Y%m%dT%H%M%SZ)
    START_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
    mkdir -p "$WORK/results"
    RUNS_TSV=$WORK/results/runs-$stamp.tsv
    printf 'set\tscheme\tcap\ttool\trun\tstatus\twall_s\tuser_s\tsys_s\tmaxrss_kib\tfiles\tbytes\tload1\tnote\n' >"$RUNS_TSV"
    log "corpus warm-up, then runs (raw results: $RUNS_TSV)"
    warm_corpus small
    warm_corpus large
    local report_args=(--section prefetch-bench)
    if wanted_scheme https; then
        probe_protocols "$WORK/results/protocols-$stamp.md"
        report_args=(--section prefetch-https --protocols "$WORK/results/protocols-$stamp.md")
    fi
    # Floor runs have their own section: they must not replace the peers' tables.
    [[ ${TOOLS[*]} != *floor* ]] || report_args[1]=prefetch-floor
    local results_args=(--results "$BENCH_DIR/RESULTS.md")
    [[ $WRITE_RESULTS -eq 1 ]] || results_args=()
    LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
    run_all
    write_meta "$WORK/results/meta-$stamp.txt"
    echo
    # No __pycache__ in bench/ (report.py imports results_md).
    PYTHONDONTWRITEBYTECODE=1 "$PYTHON" "$BENCH_DIR/report.py" --runs "$RUNS_TSV" --meta "$WORK/results/meta-$stamp.txt" \
        "${results_args[@]}" "${report_args[@]}"
    [[ -z $RUNS_FILE ]] || cp "$RUNS_TSV" "$RUNS_FILE"
    # Non-zero when any run failed, so a CI job notices; the table above says which.
    if cut -f5 "$RUNS_TSV" | grep -qx FAILED; then
        log "some runs FAILED (see above and bench/work/logs/)"
        exit 1
    fi
}

main "$@"
