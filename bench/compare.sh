#!/usr/bin/env bash
# Compare: the working tree (new, B) against a commit (REF, A), interleaved A/B, to catch a
# change that makes imgd slower. Builds both (release), runs the prefetch sets (small and
# large, http and https + HTTP/2, `imgd prefetch` and the daemon path), lookups (`get` hits,
# 16 clients, not pipelined and depth 16) and start-up (`imgctl --help`, `imgd prefetch` of an
# empty list), each figure as pairs of back-to-back runs, and prints new ÷ REF per pair with
# the median and min–max. Writes its section of bench/RESULTS.md. See bench/README.md, "Compare".
#
#   bench/compare.sh [--quick] [--runs R] [--small N] [--large M] [--only prefetch,lookup,start]
#                    [--no-results] REF
#
# Environment: IMGD_A and IMGCTL_A (REF's binaries: no REF build; REF then only names them),
# IMGD_B and IMGCTL_B (the new side's: no build of the working tree), LOOKUP_BENCH (the lookup
# client; otherwise this tree's imgd-lookup-bench, built), PYTHON (python3).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=compare
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/compare    # git-ignored: REF's worktrees, cached binaries, runs, logs

# Settings (see usage).
QUICK=0
RUNS=3
SMALL=20000
LARGE=200
LOOKUP_SECONDS=3
START_REPS=20
ONLY=prefetch,lookup,start
WRITE_RESULTS=1
REF=""
ORIG_ARGS="$*"

# State shared by the functions below.
REF_SHA=""
A_IMGD=""; A_IMGCTL=""; A_DESC=""
B_IMGD=""; B_IMGCTL=""; B_DESC=""; CLIENT=""
RUN_DIR=""
FAILED_STEPS=()

usage() {
    script_header 14
    cat <<'EOF'

Options:
  --quick        5,000 small + 50 large images, 3 pairs, 2 s lookups, 10 start-ups a side
                 per round (a few minutes once both builds exist)
  --runs R       pairs (rounds) per figure (default 3; a pair of the quick sets takes about a
                 minute, of the full sets several)
  --small N      small images in the prefetch set (default 20000)
  --large M      large images (default 200)
  --only LIST    which parts: prefetch, lookup, start (default all three)
  --no-results   leave bench/RESULTS.md as it is (the table is printed either way)

REF is anything git names a commit by (a hash, HEAD~3, a branch). It is built in its own
worktree, bench/work/compare/ref-<hash> (git worktree add --detach; its own .build), and its
imgd and imgctl are kept in bench/work/compare/bin/<hash>/: a second run against the same
commit does not build again. The working tree is built in place (swift build -c release:
imgd, imgctl, imgd-lookup-bench), uncommitted changes included. Runs as root (a loop mount,
nginx). The exit status is 1 when a part failed; a slower figure does not change it.
EOF
}

parse_args() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --quick) QUICK=1; SMALL=5000; LARGE=50; RUNS=3; LOOKUP_SECONDS=2; START_REPS=10 ;;
            --runs) RUNS=$2; shift ;;
            --small) SMALL=$2; shift ;;
            --large) LARGE=$2; shift ;;
            --only) ONLY=$2; shift ;;
            --no-results) WRITE_RESULTS=0 ;;
            -h|--help) usage; exit 0 ;;
            -*) usage >&2; die "unknown option: $1" ;;
            *) [[ -z $REF ]] || die "one REF only (got $REF and $1)"; REF=$1 ;;
        esac
        shift
    done
    [[ $RUNS =~ ^[1-9][0-9]*$ && $SMALL =~ ^[1-9][0-9]*$ && $LARGE =~ ^[1-9][0-9]*$ ]] \
        || die "--runs, --small and --large want positive whole numbers"
    [[ $ONLY =~ ^(prefetch|lookup|start)(,(prefetch|lookup|start))*$ ]] \
        || die "--only wants names among prefetch,lookup,start"
    if [[ -n ${IMGD_A:-} ]]; then
        [[ -n ${IMGCTL_A:-} ]] || die "IMGD_A wants IMGCTL_A beside it"
    else
        [[ -n $REF ]] || { usage >&2; die "name the commit to compare against (REF)"; }
    fi
    if [[ -n ${IMGD_B:-} && -z ${IMGCTL_B:-} ]]; then die "IMGD_B wants IMGCTL_B beside it"; fi
    require_root "a loop mount, nginx, apt-get"
}

wanted() { [[ ,$ONLY, == *,$1,* ]]; }

# --- Binaries ------------------------------------------------------------------------------

# REF's imgd and imgctl: IMGD_A/IMGCTL_A when set; else bin/<hash>/ when an earlier run left
# them there; else a release build in the worktree ref-<hash> (made when missing), copied to
# bin/<hash>/ through a temporary folder, so a build that fails half-way caches nothing.
ref_binaries() {
    if [[ -n ${IMGD_A:-} ]]; then
        A_IMGD=$(readlink -f "$IMGD_A"); A_IMGCTL=$(readlink -f "$IMGCTL_A")
        [[ -x $A_IMGD && -x $A_IMGCTL ]] || die "IMGD_A/IMGCTL_A: no executables at $IMGD_A, $IMGCTL_A"
        A_DESC="$A_IMGD (IMGD_A${REF:+, given as $REF})"
        REF=${REF:-IMGD_A}
        return
    fi
    REF_SHA=$(git -C "$REPO_DIR" rev-parse --verify --quiet "$REF^{commit}") || die "git knows no commit $REF"
    local short=${REF_SHA:0:12} bin=$WORK/bin/${REF_SHA:0:12} tree=$WORK/ref-${REF_SHA:0:12}
    local logf=$WORK/logs/build-ref-$short.log
    A_DESC="git $short ($(git -C "$REPO_DIR" log -1 --format=%s "$REF_SHA" | cut -c1-70)), release"
    if [[ -x $bin/imgd && -x $bin/imgctl ]]; then
        log "REF $REF = $short: cached binaries in $bin"
    else
        if [[ ! -e $tree/Package.swift ]]; then
            # --force: the path may still be registered from a worktree deleted by hand.
            log "REF $REF = $short: git worktree add --detach $tree"
            git -C "$REPO_DIR" worktree add --force --detach "$tree" "$REF_SHA" >"$logf" 2>&1 \
                || die "git worktree add failed (see $logf)"
        fi
        log "building REF $short: swift build -c release (imgd, imgctl) in $tree (log: $logf)"
        local product
        for product in imgd imgctl; do
            (cd "$tree" && swift build -c release --product "$product") >>"$logf" 2>&1 \
                || die "the release build of REF's $product failed (see $logf)"
        done
        local out
        out=$(cd "$tree" && swift build -c release --show-bin-path)
        rm -rf "$bin.tmp"
        mkdir -p "$bin.tmp"
        cp "$out/imgd" "$out/imgctl" "$bin.tmp/"
        rm -rf "$bin"
        mv "$bin.tmp" "$bin"
        log "REF's binaries cached in $bin"
    fi
    A_IMGD=$bin/imgd; A_IMGCTL=$bin/imgctl
}

# The working tree's imgd, imgctl and (for lookups) imgd-lookup-bench: IMGD_B/IMGCTL_B and
# LOOKUP_BENCH when set, else built in place (.build/release), as the other scripts do.
new_binaries() {
    local products=() logf=$WORK/logs/build-new.log out
    [[ -z ${IMGD_B:-} ]] && products+=(imgd imgctl)
    if wanted lookup && [[ -z ${LOOKUP_BENCH:-} ]]; then products+=(imgd-lookup-bench); fi
    if [[ ${#products[@]} -gt 0 ]]; then
        log "building the working tree: swift build -c release (${products[*]}) (log: $logf)"
        release_build "$logf" "$REPO_DIR/.build" "${products[@]}" \
            || die "the release build of $BUILD_PRODUCT failed (see $logf)"
        out=$(cd "$REPO_DIR" && swift build -c release --show-bin-path)
    fi
    B_IMGD=$(readlink -f "${IMGD_B:-$out/imgd}"); B_IMGCTL=$(readlink -f "${IMGCTL_B:-$out/imgctl}")
    CLIENT=${LOOKUP_BENCH:-${out:-}/imgd-lookup-bench}
    [[ -x $B_IMGD && -x $B_IMGCTL ]] || die "no executable imgd/imgctl at $B_IMGD, $B_IMGCTL"
    if [[ -n ${IMGD_B:-} ]]; then
        B_DESC="$B_IMGD (IMGD_B)"
    else
        B_DESC="working tree at git $(imgd_revision), release"
    fi
}

# --- The parts -------------------------------------------------------------------------------

# step NAME COMMAND…: runs one part, its output (stdout and stderr) in RUN_DIR/NAME.log and
# its progress lines (stderr) on the terminal too; a failure is noted and the other parts
# still run.
step() {
    local name=$1 started rc=0 logf=$RUN_DIR/$1.log
    shift
    started=$(date +%s)
    log "$name: $* (log: $logf)"
    : >"$logf"
    { "$@" 2>&1 >>"$logf" | tee -a "$logf" >&2; } || rc=$?
    if [[ $rc -ne 0 ]]; then
        FAILED_STEPS+=("$name (exit $rc)")
        log "$name FAILED (exit $rc); the last lines of $RUN_DIR/$name.log:"
        tail -5 "$RUN_DIR/$name.log" >&2
    else
        log "$name done in $(( $(date +%s) - started )) s"
    fi
}

# The prefetch sets through prefetch-bench.sh, with REF's imgd as the twin tools (IMGD_REF):
# imgd prefetch and the daemon path, both binaries in every round, small and large, http and
# https + HTTP/2 interleaved round by round. No curl: the figures are new ÷ REF.
run_prefetch() {
    IMGD=$B_IMGD IMGD_REF=$A_IMGD "$BENCH_DIR/prefetch-bench.sh" --schemes http,https --sets small,large \
        --tools imgd,imgd-daemon --small "$SMALL" --large "$LARGE" --runs "$RUNS" --no-results \
        --runs-file "$RUN_DIR/prefetch.tsv"
}

# Lookups through lookup-bench.sh, REF's daemon as imgd-ref beside the new one, the same
# client for both, no Redis.
run_lookup() {
    IMGD=$B_IMGD IMGD_REF=$A_IMGD LOOKUP_BENCH=$CLIENT "$BENCH_DIR/lookup-bench.sh" --no-redis --no-results \
        --clients 16 --depth 16 --runs "$RUNS" --seconds "$LOOKUP_SECONDS" --runs-file "$RUN_DIR/lookup.tsv"
}

# Start-up: `imgctl --help`, and `imgd prefetch` of an empty list on an existing cache (each
# side its own, made by the untimed warm-up runs), START_REPS runs a side per round, alternated.
run_start() {
    local dir=$WORK/start
    rm -rf "$dir"
    mkdir -p "$dir/new" "$dir/ref"
    : >"$dir/empty.txt"
    : >"$RUN_DIR/startup.tsv"
    # startup_ab.py splits each command line as a shell would: %q quotes the paths.
    "$PYTHON" "$BENCH_DIR/startup_ab.py" --figure '`imgctl --help`' --rounds "$RUNS" --reps "$START_REPS" \
        --new "$(printf '%q --help' "$B_IMGCTL")" --ref "$(printf '%q --help' "$A_IMGCTL")" \
        --out "$RUN_DIR/startup.tsv"
    "$PYTHON" "$BENCH_DIR/startup_ab.py" --figure '`imgd prefetch` of an empty list, existing cache' \
        --rounds "$RUNS" --reps "$START_REPS" \
        --new "$(printf '%q prefetch %q --cache %q' "$B_IMGD" "$dir/empty.txt" "$dir/new/cache")" \
        --ref "$(printf '%q prefetch %q --cache %q' "$A_IMGD" "$dir/empty.txt" "$dir/ref/cache")" \
        --out "$RUN_DIR/startup.tsv"
}

# key=value lines for compare_report.py: the run, both sides, the machine, what each part did.
write_meta() {
    local parts="" fs
    if wanted prefetch; then
        fs=$(sed -n 's/^fs=//p' "$BENCH_DIR"/work/results/meta-*.txt 2>/dev/null | tail -1)
        parts+="Prefetch: $SMALL small and $LARGE large images, cap 16, on ${fs:-?}. "
    fi
    wanted lookup && parts+="Lookups: 1,000 cached images, 16 clients, $LOOKUP_SECONDS s a run, the working tree's client for both. "
    wanted start && parts+="Start-up: medians of $START_REPS runs a side per round, the cache on $(findmnt -n -o FSTYPE,SOURCE -T "$WORK" | head -1 | tr -s ' ' ' '). "
    {
        echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
        echo "args=$ORIG_ARGS"
        echo "ref=$REF${REF_SHA:+ (${REF_SHA:0:12})}"
        echo "ref_desc=$A_DESC"
        echo "new_desc=$B_DESC"
        echo "machine=Linux $(uname -r), $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
        echo "parts=${parts% }"
        echo "load_before=$1"
        echo "load_after=$(cut -d' ' -f1 /proc/loadavg)"
    } >"$RUN_DIR/meta.txt"
}

main() {
    parse_args "$@"
    mkdir -p "$WORK/logs"
    RUN_DIR=$WORK/runs/$(date -u +%Y%m%dT%H%M%SZ)
    mkdir -p "$RUN_DIR"
    ref_binaries
    new_binaries
    log "A (REF $REF): $A_IMGD"
    log "B (new):      $B_IMGD"
    local load_before
    load_before=$(cut -d' ' -f1 /proc/loadavg)
    wanted prefetch && step prefetch run_prefetch
    wanted lookup && step lookup run_lookup
    wanted start && step start run_start
    write_meta "$load_before"
    local report=(--meta "$RUN_DIR/meta.txt")
    [[ -s $RUN_DIR/prefetch.tsv ]] && report+=(--prefetch "$RUN_DIR/prefetch.tsv")
    [[ -s $RUN_DIR/lookup.tsv ]] && report+=(--lookup "$RUN_DIR/lookup.tsv")
    [[ -s $RUN_DIR/startup.tsv ]] && report+=(--startup "$RUN_DIR/startup.tsv")
    [[ $WRITE_RESULTS -eq 1 ]] && report+=(--results "$BENCH_DIR/RESULTS.md")
    echo
    PYTHONDONTWRITEBYTECODE=1 "$PYTHON" "$BENCH_DIR/compare_report.py" "${report[@]}" | tee "$RUN_DIR/report.md"
    [[ $WRITE_RESULTS -eq 0 ]] || log "wrote the compare section of bench/RESULTS.md"
    log "raw records and logs: $RUN_DIR"
    if [[ ${#FAILED_STEPS[@]} -gt 0 ]]; then
        log "FAILED: ${FAILED_STEPS[*]}"
        exit 1
    fi
}

main "$@"
