#!/usr/bin/env bash
# A fleet on one machine: N imgd daemons (own folders each; N = 1, 4, 8) warm the same list of
# small images from a local origin that delays every response by a fixed time (20 ms: a remote
# origin's round trip), behind the shipped nginx tier (contrib/fleet/nginx-tier.conf, rendered by
# tier-smoke.sh --render) and without it. Reports origin requests per URL (the goal: 1.0 whatever
# N, behind the tier) and the p50 and p99 of the daemons' list completion. Writes its section of
# bench/RESULTS.md.
#
#   bench/fleet-bench.sh [--quick] [--urls N] [--counts 1,4,8] [--delay-ms D]
#
# Environment: IMGD, IMGCTL (otherwise built), PYTHON (python3). Needs root (nginx's workers).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=fleet
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/fleet
URLS=5000
COUNTS=1,4,8
DELAY=20
ORIG_ARGS="$*"
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) URLS=500; COUNTS=1,4; shift ;;
        --urls) URLS=$2; shift 2 ;;
        --counts) COUNTS=$2; shift 2 ;;
        --delay-ms) DELAY=$2; shift 2 ;;
        -h|--help) script_header 11; exit 0 ;;
        *) die "unknown option $1" ;;
    esac
done
require_root "nginx's workers run as nobody"
cleanup() {
    local status=$?
    if [[ -s $WORK/daemons.pid ]]; then xargs -r kill -TERM <"$WORK/daemons.pid" 2>/dev/null || true; fi
    if [[ -s $WORK/tier/nginx.pid ]]; then
        kill -QUIT "$(cat "$WORK/tier/nginx.pid")" 2>/dev/null || true
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK"
chmod 755 "$BENCH_DIR/work" "$WORK"
ensure_nginx_bench_packages
prepare_imgd "$WORK/build.log"
IMGCTL_BIN=${IMGCTL:-$(dirname "$IMGD_BIN")/imgctl}
[[ -x $IMGCTL_BIN ]] || release_build "$WORK/build.log" "$REPO_DIR/.build" imgctl
CORPUS=$BENCH_DIR/work/corpus/s$URLS-l20
"$PYTHON" "$BENCH_DIR/gen_corpus.py" generate --dir "$CORPUS" --small "$URLS" --large 20

# The tier, as shipped, with the test deny list (the origin is on 127.0.0.1).
TIER_PORT=$(free_port)
rm -rf "$WORK/tier"
bash "$REPO_DIR/contrib/fleet/tier-smoke.sh" --render "$WORK/tier" "$TIER_PORT" /etc/ssl/certs/ca-certificates.crt >/dev/null
nginx -p "$WORK/tier" -e "$WORK/tier/error.log" -c "$WORK/tier/nginx.conf" || die "the tier did not start"
for _ in $(seq 50); do [[ -s $WORK/tier/nginx.pid ]] && break; sleep 0.1; done
log "tier: nginx $(nginx_version) on 127.0.0.1:$TIER_PORT; imgd: $IMGD_BIN; $URLS URLs, daemons $COUNTS, origin delay $DELAY ms"

table=$(PYTHONDONTWRITEBYTECODE=1 "$PYTHON" "$BENCH_DIR/fleet_bench.py" --imgd "$IMGD_BIN" --imgctl "$IMGCTL_BIN" \
    --corpus "$CORPUS" --urls "$URLS" --delay-ms "$DELAY" --counts "$COUNTS" --tier-port "$TIER_PORT" \
    --work "$WORK/data" --pidfile "$WORK/daemons.pid")
echo "$table"
body=$(cat <<MD
## Fleet: N daemons behind the shared tier

Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/fleet-bench.sh $ORIG_ARGS\` ($(imgd_revision)); $(uname -r), $(nproc) cores.
N imgd daemons (own folders, max-parallel 16) on this machine warm the same $URLS-URL list at
once from a local origin (Python, keep-alive) that answers every request after $DELAY ms; once
through the shipped nginx tier (\`contrib/fleet/nginx-tier.conf\`), once from the origin directly.
Each run uses URLs no cache has seen. Completion: from the drop to each daemon's \`list_done\`.
Published shapes to compare: Kraken distributes to 2,600 hosts with p99/p50 ≈ 1.8; Dragonfly
reports completion flat from 1 to 7,000 clients.

$table
MD
)
write_results_section fleet-bench "bench/fleet-bench.sh $ORIG_ARGS" "$body"
