#!/usr/bin/env bash
# How fast a calendar window takes effect: starts the release imgd with N windows of 2 s, 1 s
# apart, the first opening 3 s ahead (TZ=UTC), subscribes to the `window` event and measures,
# for each opening and close, the time from the window's instant to the event's arrival (the
# event goes out after the downloader has been given the new caps). Writes its section of
# bench/RESULTS.md.
#
#   bench/window-bench.sh [--windows N]      (default 10: 20 transitions, about 35 s)
#
# Environment: IMGD=/path/to/imgd (otherwise it builds .build/release/imgd), PYTHON (python3).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=window
# shellcheck source=lib.sh
source "$BENCH_DIR/lib.sh"
WINDOWS=10
ORIG_ARGS="$*"
while [[ $# -gt 0 ]]; do
    case $1 in
        --windows) WINDOWS=$2; shift 2 ;;
        -h|--help) script_header 10; exit 0 ;;
        *) die "unknown option $1" ;;
    esac
done

WORK=$BENCH_DIR/work/window
rm -rf "$WORK" && mkdir -p "$WORK"
prepare_imgd "$WORK/build.log"
log "imgd: $IMGD_BIN; $WINDOWS windows"

table=$(PYTHONDONTWRITEBYTECODE=1 "$PYTHON" - "$IMGD_BIN" "$WORK" "$WINDOWS" <<'PY'
import json, os, socket, statistics, subprocess, sys, time

imgd, work, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
start = int(time.time()) + 3
def clock(t):
    t %= 86400
    return f"{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"
windows = [(start + 3 * i, start + 3 * i + 2) for i in range(count)]
with open(f"{work}/imgd.toml", "w") as f:
    f.write("max-parallel = 2\n")
    for i, (o, c) in enumerate(windows):
        f.write(f'[window."w{i}"]\nhours = "{clock(o)}-{clock(c)}"\nmax-parallel = {4 + i}\n')
sock = f"{work}/imgd.sock"
env = dict(os.environ, TZ="UTC")
daemon = subprocess.Popen([imgd, "--config", f"{work}/imgd.toml", "--spool", f"{work}/spool", "--cache", f"{work}/cache",
                           "--state", f"{work}/state", "--socket", sock, "--courtesy", "false"],
                          stdout=open(f"{work}/imgd.log", "w"), stderr=subprocess.STDOUT, env=env)
try:
    deadline = time.time() + 30
    while True:
        try:
            s = socket.socket(socket.AF_UNIX); s.connect(sock); break
        except OSError:
            if time.time() > deadline or daemon.poll() is not None: sys.exit("imgd did not start")
            time.sleep(0.05)
    s.sendall(b'{"cmd":"subscribe","events":["window"]}\n')
    reader = s.makefile("rb")
    reader.readline()
    lags = []
    previous = None
    while len(lags) < 2 * count:
        line = reader.readline()
        arrived = time.time()
        if not line: break
        data = json.loads(line)["data"]
        if data["name"] is not None:
            expected = data["current"]["opens_at"] / 1000
            previous = data["current"]["closes_at"] / 1000
        elif previous is not None:
            expected = previous
        else:
            continue
        lags.append((arrived - expected) * 1000)
finally:
    daemon.terminate(); daemon.wait()
lags.sort()
p = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))]
print(f"| transitions | median | p95 | max |\n|---|---|---|---|\n| {len(lags)} | {statistics.median(lags):.2f} ms | {p(0.95):.2f} ms | {lags[-1]:.2f} ms |")
PY
)
echo "$table"
body=$(cat <<MD
## Calendar windows: how fast a window change takes effect

Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/window-bench.sh $ORIG_ARGS\` ($(imgd_revision)); $(uname -r), $(nproc) cores.
From each window's opening or close (the wall-clock instant its \`hours\` name) to the arrival of
the \`window\` event at a subscriber on the control socket; the event is published after the
downloader has been sent the new caps (the engine takes them on its next turn).

$table
MD
)
write_results_section window-bench "bench/window-bench.sh $ORIG_ARGS" "$body"
