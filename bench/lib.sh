# Shell functions the benchmark scripts share (bash; sourced, not run). A script sets
# BENCH_DIR (its own folder) and LOG_TAG (the word in its log lines) and then sources this:
#
#   BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
#   LOG_TAG=ready
#   source "$BENCH_DIR/lib.sh"
#
# It sets REPO_DIR (the checkout) and PYTHON (python3 unless set). Variables the functions
# read or set are named in each function's comment; nothing here runs on its own.

REPO_DIR=$(dirname "$BENCH_DIR")
PYTHON=${PYTHON:-python3}

# --- Messages and options ------------------------------------------------------------------

# A timestamped line on stderr, "[TAG HH:MM:SS] message", so a step's progress shows on the
# terminal (and in run-all's step logs) without mixing into the results printed on stdout.
log() { printf '[%s %s] %s\n' "$LOG_TAG" "$(date +%H:%M:%S)" "$*" >&2; }

# Logs the error and exits 1; the script's EXIT trap then stops what it started.
die() { log "error: $*"; exit 1; }

# Prints lines 2..LAST of the running script without their "# ": each script's header comment
# is the first part of its --help, so the two cannot drift apart.
script_header() { sed -n "2,${1}p" "$BENCH_DIR/${0##*/}" | sed 's/^# \{0,1\}//'; }

# Dies unless root, saying which of the script's steps need it ($1: "apt-get, mount, nginx").
require_root() { [[ $EUID -eq 0 ]] || die "run as root ($1)"; }

# --- Packages and binaries ----------------------------------------------------------------

# apt_install LOG PKG...: installs the Debian packages named (none: nothing to do), output to
# LOG. apt-get update only when the first try fails (a stale package list), and
# DPkg::Lock::Timeout because other work on the machine may be running apt at the same time:
# wait for it rather than fail.
apt_install() {
    local logf=$1; shift
    [[ $# -gt 0 ]] || return 0
    log "installing: $*"
    export DEBIAN_FRONTEND=noninteractive
    local apt=(apt-get install -y -o DPkg::Lock::Timeout=600 "$@")
    "${apt[@]}" >"$logf" 2>&1 \
        || { apt-get update -o DPkg::Lock::Timeout=600 >>"$logf" 2>&1 && "${apt[@]}" >>"$logf" 2>&1; } \
        || die "apt-get install $* failed (see $logf)"
}

# release_build LOG SCRATCH PRODUCT...: `swift build -c release --product P` of each product,
# in REPO_DIR, with SwiftPM's --scratch-path SCRATCH (REPO_DIR/.build is its default); all
# output to LOG (emptied first). Returns 1 at the first product that fails, named in
# BUILD_PRODUCT; the caller decides whether that ends the script (most) or only skips imgd
# (prefetch-bench.sh).
release_build() {
    local logf=$1 scratch=$2; shift 2
    : >"$logf"
    for BUILD_PRODUCT in "$@"; do
        (cd "$REPO_DIR" && swift build -c release --scratch-path "$scratch" --product "$BUILD_PRODUCT") \
            >>"$logf" 2>&1 || return 1
    done
}

# imgd_binary LOG: sets IMGD_BIN to $IMGD when set (run-all.sh sets it, so no step builds
# again), else builds imgd (release, .build; output to LOG) and names .build/release/imgd.
# Returns 1 when the build fails; whether IMGD_BIN is executable is the caller's check.
imgd_binary() {
    IMGD_BIN=${IMGD:-}
    [[ -z $IMGD_BIN ]] || return 0
    IMGD_BIN=$REPO_DIR/.build/release/imgd
    log "building imgd: swift build -c release --product imgd (log: $1)"
    release_build "$1" "$REPO_DIR/.build" imgd
}

# prepare_imgd LOG: imgd_binary, but a failed build or a missing binary ends the script. IMGD_BIN
# is made absolute and free of links, as /proc/PID/exe shows it (stop_pidfile_daemon compares).
prepare_imgd() {
    imgd_binary "$1" || die "the release build failed (see $1)"
    [[ -x $IMGD_BIN ]] || die "no executable imgd at $IMGD_BIN"
    IMGD_BIN=$(readlink -f "$IMGD_BIN")
}

# courtesy_off BIN: prints "--courtesy false" when BIN has the courtesy loop (earlier builds do
# not). The loop lowers imgd's prefetch parallelism under the load a benchmark itself makes on
# these 2 cores, and the peers compared have no such loop: benchmarks measure imgd without it.
courtesy_off() { "$1" run --help 2>/dev/null | grep -q -- '--courtesy ' && echo "--courtesy false"; return 0; }

# The revision imgd was built from, for the results: the short commit, and "+ uncommitted
# changes" when Sources or Package.swift differ from it.
imgd_revision() {
    local rev
    rev=$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [[ -n $(git -C "$REPO_DIR" status --porcelain -- Sources Package.swift 2>/dev/null) ]]; then
        rev+=" + uncommitted changes"
    fi
    printf '%s' "$rev"
}

# --- The work area: a journaled ext4 image on a loop device -------------------------------

# mount_work_fs DIR SIZE: a fresh ext4 image DIR/fs.img of SIZE (as truncate takes it: 4G,
# 900M) mounted on DIR/mnt; sets MOUNTED=1 for unmount_work_fs. The reason: / on these machines
# is ext4 without a journal, where deleting many files and creating many right after turns
# quadratic (see /work/shared/TOOLCHAIN.md), which no ordinary server shows. -J size=64: a 64 MB
# journal; lazy_itable_init=0 so no background inode-table zeroing (ext4lazyinit) competes with
# the timed runs. Dies when the loop mount fails (the scripts offer --no-loop for that).
mount_work_fs() {
    local dir=$1 size=$2
    mkdir -p "$dir/mnt"
    if mountpoint -q "$dir/mnt"; then
        log "unmounting a work area left by an earlier run"
        umount "$dir/mnt"
    fi
    rm -f "$dir/fs.img"
    truncate -s "$size" "$dir/fs.img"
    mkfs.ext4 -q -F -J size=64 -E lazy_itable_init=0,lazy_journal_init=0 "$dir/fs.img"
    mount -o loop "$dir/fs.img" "$dir/mnt" || die "mount -o loop failed; try --no-loop"
    MOUNTED=1
}

# unmount_work_fs DIR: at exit, undoes mount_work_fs (if it mounted) and deletes the image,
# which the runs filled: it must not be left behind. A busy mount is detached lazily.
unmount_work_fs() {
    [[ ${MOUNTED:-0} -eq 1 ]] || return 0
    umount "$1/mnt" 2>/dev/null || umount -l "$1/mnt" || true
    rm -f "$1/fs.img"
}

# setup_data_area SIZE_MIB: the daemon's folders for ready-bench.sh and memory-bench.sh. With
# USE_LOOP=1 a fresh SIZE_MIB image on WORK/mnt (mount_work_fs), else an emptied WORK/data on
# /. Sets DATA (the folder) and FS_DESC (the filesystem, for the results).
setup_data_area() {
    local size_mib=$1
    if [[ $USE_LOOP -eq 1 ]]; then
        mount_work_fs "$WORK" "${size_mib}M"
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

# --- Processes ------------------------------------------------------------------------------

# stop_pidfile_daemon PIDFILE: at exit, a daemon that a Python driver (ready_bench.py,
# memory_bench.py) started and left behind: it writes the pid to PIDFILE while imgd runs.
# SIGTERM only when /proc/PID/exe is our IMGD_BIN (a stale pid may be someone else's now), then
# up to 10 s for it to go (imgd stops within 5 s), so the work area can be unmounted.
stop_pidfile_daemon() {
    local pidfile=$1 pid
    [[ -s $pidfile ]] || return 0
    pid=$(cat "$pidfile")
    if [[ -n ${IMGD_BIN:-} && $(readlink "/proc/$pid/exe" 2>/dev/null) == "$(readlink -f "$IMGD_BIN")" ]]; then
        log "stopping imgd (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 100); do [[ -e /proc/$pid ]] || break; sleep 0.1; done
    fi
    rm -f "$pidfile"
}

# A free TCP port on 127.0.0.1 (the kernel's pick), for nginx.
free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# nginx_start DIR ROOT [EXTRA]: nginx from Debian with bench/nginx.conf.template, serving ROOT
# on 127.0.0.1 and a free port (set in NGINX_PORT); its config, pid file (DIR/nginx.pid), logs
# and temp folders in DIR, emptied first. EXTRA (a file, optional) is copied to
# DIR/conf.d/extra.conf, which the template includes in its http block: more server blocks
# (prefetch-bench.sh's https servers). -e: the startup error log goes there too, not to
# /var/log/nginx. Waits for the pid file, which nginx_stop needs.
nginx_start() {
    local dir=$1 root=$2 extra=${3:-}
    rm -rf "$dir"
    mkdir -p "$dir/conf.d"
    [[ -z $extra ]] || cp "$extra" "$dir/conf.d/extra.conf"
    NGINX_PORT=$(free_port)
    sed -e "s|@PORT@|$NGINX_PORT|g" -e "s|@ROOT@|$root|g" -e "s|@WORK@|$dir|g" \
        "$BENCH_DIR/nginx.conf.template" >"$dir/nginx.conf"
    nginx -t -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" || die "nginx config test failed"
    nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" || die "nginx did not start"
    for _ in $(seq 50); do [[ -s $dir/nginx.pid ]] && break; sleep 0.1; done
    [[ -s $dir/nginx.pid ]] || die "nginx wrote no pid file"
}

# nginx_stop DIR: at exit, stops the nginx that nginx_start left in DIR, by its pid file only
# (never by name: another nginx may be running): SIGQUIT (graceful), SIGTERM after 5 s.
nginx_stop() {
    local pidfile=$1/nginx.pid pid
    [[ -s $pidfile ]] || return 0
    pid=$(cat "$pidfile")
    kill -QUIT "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null
    rm -f "$pidfile"
}

nginx_version() { nginx -v 2>&1 | sed 's|.*nginx/||'; }

# For a driver that runs a daemon (pid file $WORK/daemon.pid) against nginx ($WORK/nginx) on a
# loop image ($WORK): at exit, whatever happened, stop the daemon (only if it is our imgd
# binary), nginx, and unmount the image; the exit status is kept.
nginx_bench_cleanup() {
    local status=$?
    stop_pidfile_daemon "$WORK/daemon.pid"
    nginx_stop "$WORK/nginx"
    unmount_work_fs "$WORK"
    exit "$status"
}

# What such a driver needs installed: nginx, curl, mkfs.ext4.
ensure_nginx_bench_packages() {
    local want=()
    command -v nginx >/dev/null || want+=(nginx)
    command -v curl >/dev/null || want+=(curl)
    command -v mkfs.ext4 >/dev/null || want+=(e2fsprogs)
    apt_install "$WORK/apt.log" "${want[@]}"
}

# --- Results --------------------------------------------------------------------------------

# write_results_section NAME SCRIPT BODY [--first]: BODY between NAME's marker comments in
# bench/RESULTS.md, replacing only that section (results_md.py does it, for the Python drivers
# too); --first puts a new section right after the title.
write_results_section() {
    PYTHONDONTWRITEBYTECODE=1 "$PYTHON" "$BENCH_DIR/results_md.py" --results "$BENCH_DIR/RESULTS.md" \
        --name "$1" --script "$2" --body "$3" "${@:4}"
}
