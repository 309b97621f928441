#!/usr/bin/env bash
# Deadline lists (issue 31 §2): how close `lists`' eta is to a list's real finish (at 25%, 50%
# and 75% settled), and what the larger share does: a list without a deadline and an equal
# one with a deadline it can meet only with more than an equal share, against the same two
# without a deadline. The origin delays every response (--delay-ms, 20 by default). Writes its
# section of bench/RESULTS.md.
#
#   bench/deadline-bench.sh [--urls N] [--delay-ms D] [--parallel P]   (defaults 3000, 20, 8)
#
# Environment: IMGD=/path/to/imgd (otherwise it builds .build/release/imgd), PYTHON (python3).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=deadline
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
URLS=3000
DELAY=20
PARALLEL=8
ORIG_ARGS="$*"
while [[ $# -gt 0 ]]; do
    case $1 in
        --urls) URLS=$2; shift 2 ;;
        --delay-ms) DELAY=$2; shift 2 ;;
        --parallel) PARALLEL=$2; shift 2 ;;
        -h|--help) script_header 9; exit 0 ;;
        *) die "unknown option $1" ;;
    esac
done

WORK=$BENCH_DIR/work/deadline
rm -rf "$WORK" && mkdir -p "$WORK"
prepare_imgd "$WORK/build.log"
CORPUS=$BENCH_DIR/work/corpus/s$URLS-l20
"$PYTHON" "$BENCH_DIR/gen_corpus.py" generate --dir "$CORPUS" --small "$URLS" --large 20
log "imgd: $IMGD_BIN; $URLS URLs a list, origin delay $DELAY ms, max-parallel $PARALLEL"
table=$(PYTHONDONTWRITEBYTECODE=1 "$PYTHON" "$BENCH_DIR/deadline_bench.py" "$IMGD_BIN" "$WORK" "$CORPUS" "$URLS" "$DELAY" "$PARALLEL")
echo "$table"
body=$(cat <<MD
## Deadline lists: the estimate, and the larger share

Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/deadline-bench.sh $ORIG_ARGS\` ($(imgd_revision)); $(uname -r), $(nproc) cores.
An origin on 127.0.0.1 that waits $DELAY ms before each response; max-parallel $PARALLEL; lists of $URLS images.
The estimate: \`lists\`' \`eta\` read when 25%, 50% and 75% of a list with a far deadline had
settled, against its finish. The share: a list without a deadline, then (0.5 s later) an equal
list whose deadline is 1.6 × the first run's time; then the same two without a deadline.

$table
MD
)
write_results_section deadline-bench "bench/deadline-bench.sh $ORIG_ARGS" "$body"
