#!/usr/bin/env bash
# The cache index at scale: builds an index of N synthetic entries (default 1,000,000), then
# measures opening it (the work before READY), lookup latency, and lookups while 100,000
# entries are evicted beside them. Writes the table to bench/RESULTS.md (its own section).
#   bench/index-bench.sh [--entries N]
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=index
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
cd "$REPO_DIR"
entries=1000000
case ${1:-} in
    -h|--help) script_header 5; exit 0 ;;
    --entries) entries=$2 ;;
esac

swift build -c release --product imgd-index-bench >/dev/null
bin="$(swift build -c release --show-bin-path)/imgd-index-bench"
work=bench/work/index-bench
mkdir -p bench/work
table=$("$bin" --entries "$entries" --dir "$work")
rm -rf "$work"
echo "$table"

fs=$(findmnt -n -o FSTYPE --target bench/work || echo unknown)
body=$(cat <<MD
## Index benchmark: $entries entries

Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/index-bench.sh\`; $(uname -r), $(nproc) cores, index on $fs (\`bench/work\`).
Rows only (no image files): a real lookup adds one \`fstatat\` for the size check. Latencies are
in-process, one thread looking up while another evicts in passes of 500. Lookups over 5 ms are
counted by where their time went, from the lookup thread's own clocks: on the CPU, runnable but
waiting for a CPU (run-queue wait, \`/proc/thread-self/schedstat\`), blocked (it gave up the CPU
itself: a lock or a disk read), or none of these (the host did not run the virtual CPU).

$table
MD
)
write_results_section index-bench bench/index-bench.sh "$body"
echo "wrote bench/RESULTS.md"
