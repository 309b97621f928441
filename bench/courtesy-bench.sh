#!/usr/bin/env bash
# What the courtesy loop gives the machine it serves: imgd warms a list of small images from a
# local nginx beside a CPU hog (one busy process, as the service the machine runs), with
# `courtesy = false` and with `courtesy = true` (threshold 20%), interleaved. Per run: the host's
# CPU stall share over the warm (PSI /proc/pressure/cpu `some` total, as a share of the warm's
# wall time), the CPU time the hog got, and how long the warm took. Needs root (nginx, a loop
# mount). Writes its section of bench/RESULTS.md.
#
#   bench/courtesy-bench.sh [--quick] [--runs R] [--urls N] [--no-loop]
#
# Environment: IMGD, IMGCTL (otherwise built), PYTHON (python3).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=courtesy
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WORK=$BENCH_DIR/work/courtesy
RUNS=3
URLS=20000
USE_LOOP=1
MOUNTED=0
ORIG_ARGS="$*"
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) RUNS=1; URLS=5000; shift ;;
        --runs) RUNS=$2; shift 2 ;;
        --urls) URLS=$2; shift 2 ;;
        --no-loop) USE_LOOP=0; shift ;;
        -h|--help) script_header 10; exit 0 ;;
        *) die "unknown option $1" ;;
    esac
done
require_root "nginx and a loop mount"
[[ -r /proc/pressure/cpu ]] || die "no /proc/pressure/cpu: this kernel does not report pressure stalls"
mkdir -p "$WORK"
trap nginx_bench_cleanup EXIT
trap 'exit 130' INT TERM
ensure_nginx_bench_packages
prepare_imgd "$WORK/build.log"
IMGCTL_BIN=${IMGCTL:-$(dirname "$IMGD_BIN")/imgctl}
[[ -x $IMGCTL_BIN ]] || release_build "$WORK/build.log" "$REPO_DIR/.build" imgctl
setup_data_area 2048
CORPUS=$BENCH_DIR/work/corpus/s$URLS-l20
"$PYTHON" "$BENCH_DIR/gen_corpus.py" generate --dir "$CORPUS" --small "$URLS" --large 20
find "$CORPUS/s" -type f -print0 | xargs -0 cat >/dev/null
nginx_start "$WORK/nginx" "$CORPUS"
"$PYTHON" "$BENCH_DIR/gen_corpus.py" lists --dir "$CORPUS" --base-url "http://127.0.0.1:$NGINX_PORT" --out "$WORK/lists"
log "nginx $(nginx_version) on 127.0.0.1:$NGINX_PORT; imgd: $IMGD_BIN; $URLS URLs, $RUNS runs per variant"

table=$(IMGD_BENCH_PIDFILE=$WORK/daemon.pid PYTHONDONTWRITEBYTECODE=1 "$PYTHON" - "$IMGD_BIN" "$IMGCTL_BIN" "$DATA" \
    "$WORK/lists/small.txt" "$RUNS" <<'PY'
import os, shutil, statistics, subprocess, sys, time

imgd, imgctl, data, listfile, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
clock_ticks = os.sysconf("SC_CLK_TCK")

def stall_total():
    for line in open("/proc/pressure/cpu"):
        if line.startswith("some "):
            return int(line.split("total=")[1])

def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / clock_ticks

def run(courtesy):
    root = os.path.join(data, "run")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    sock = os.path.join(root, "imgd.sock")
    daemon = subprocess.Popen([imgd, "--spool", f"{root}/spool", "--cache", f"{root}/cache", "--state", f"{root}/state",
                               "--socket", sock, "--max-parallel", "16", "--max-per-host", "16", "--disk-limit", "1GiB",
                               "--courtesy", courtesy, "--courtesy-threshold", "20%"],
                              stdout=open(f"{root}/imgd.log", "w"), stderr=subprocess.STDOUT)
    open(os.environ["IMGD_BENCH_PIDFILE"], "w").write(str(daemon.pid))
    try:
        deadline = time.time() + 30
        while not os.path.exists(sock):
            if time.time() > deadline: sys.exit("imgd did not start")
            time.sleep(0.05)
        hog = subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"])
        time.sleep(12)  # avg10 settles on the hog alone
        hog_before, stall_before, start = cpu_seconds(hog.pid), stall_total(), time.time()
        subprocess.run([imgctl, "--socket", sock, "warm", listfile, "--wait"], check=True, stdout=subprocess.DEVNULL)
        elapsed = time.time() - start
        stall = (stall_total() - stall_before) / 1e6 / elapsed * 100
        hog_share = (cpu_seconds(hog.pid) - hog_before) / elapsed * 100
        hog.kill(); hog.wait()
    finally:
        daemon.terminate(); daemon.wait()
        os.unlink(os.environ["IMGD_BENCH_PIDFILE"])
    return stall, hog_share, elapsed

results = {"false": [], "true": []}
for _ in range(runs):
    for variant in ("false", "true"):
        results[variant].append(run(variant))
        print(f"courtesy={variant}: stall {results[variant][-1][0]:.1f}%, hog {results[variant][-1][1]:.1f}% of a CPU, "
              f"warm {results[variant][-1][2]:.1f} s", file=sys.stderr)
med = lambda values: statistics.median(values)
print("| courtesy | CPU stall share (PSI some) | the hog's CPU | warm time |\n|---|---|---|---|")
for variant in ("false", "true"):
    rows = results[variant]
    print(f"| {variant} | {med([r[0] for r in rows]):.1f}% | {med([r[1] for r in rows]):.0f}% of a CPU | {med([r[2] for r in rows]):.1f} s |")
PY
)
echo "$table"
body=$(cat <<MD
## Courtesy to the host: a CPU hog beside a warm

Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/courtesy-bench.sh $ORIG_ARGS\` ($(imgd_revision)); $(uname -r), $(nproc) cores, $FS_DESC.
imgd (max-parallel 16) warms $URLS small images from nginx on 127.0.0.1 beside one busy process
(\`sh -c 'while :; do :; done'\`, the service the machine runs), with \`courtesy = false\` and
\`courtesy = true\` (threshold 20%), $RUNS runs each, interleaved; medians. Stall share: the
growth of \`/proc/pressure/cpu\`'s \`some\` total over the warm, as a share of its wall time.

$table
MD
)
write_results_section courtesy-bench "bench/courtesy-bench.sh $ORIG_ARGS" "$body"
