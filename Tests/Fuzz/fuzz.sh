#!/usr/bin/env bash
# make fuzz: builds imgd-fuzz with libFuzzer and AddressSanitizer (-sanitize=fuzzer,address,
# -D IMGD_FUZZING, into .build-fuzz) and runs each target for FUZZ_SECONDS (default 300).
# Exit status 1 when any target crashed, leaked, timed out or broke an invariant; the
# reproducer is in fuzz-findings/<target>/ (replay: imgd-fuzz TARGET FILE from a plain build,
# or IMGD_FUZZ_TARGET=TARGET .build-fuzz/release/imgd-fuzz FILE). A finding, once fixed, goes to
# Tests/Fuzz/Regressions/<target>/, which `make test` replays.
#
# Environment: FUZZ_SECONDS (per target, default 300), FUZZ_TARGETS (default: all eight),
# FUZZ_JOBS (targets run at once, default 1), FUZZ_SCRATCH (default .build-fuzz),
# FUZZ_ARGS (more libFuzzer flags).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

FUZZ_SECONDS=${FUZZ_SECONDS:-300}
FUZZ_TARGETS=${FUZZ_TARGETS:-control-line link-list-text link-list-json link-list-plist link-list-xml image config http-request tar}
FUZZ_JOBS=${FUZZ_JOBS:-1}
FUZZ_SCRATCH=${FUZZ_SCRATCH:-.build-fuzz}
FUZZ_ARGS=${FUZZ_ARGS:-}
FINDINGS=$REPO/fuzz-findings
LOGS=$REPO/$FUZZ_SCRATCH/fuzz-logs

echo "fuzz: building imgd-fuzz (libFuzzer + AddressSanitizer) into $FUZZ_SCRATCH"
mkdir -p "$FUZZ_SCRATCH"
if ! swift build -c release --scratch-path "$FUZZ_SCRATCH" --product imgd-fuzz \
    --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address -Xcc -fsanitize=address -Xswiftc -DIMGD_FUZZING >"$REPO/$FUZZ_SCRATCH/fuzz-build.log" 2>&1; then
    tail -40 "$REPO/$FUZZ_SCRATCH/fuzz-build.log"
    echo "fuzz: the build failed (log: $FUZZ_SCRATCH/fuzz-build.log)"
    exit 1
fi
BIN=$(swift build -c release --scratch-path "$FUZZ_SCRATCH" --show-bin-path)/imgd-fuzz
mkdir -p "$LOGS" "$FINDINGS"

# One target: its working corpus grows in $FUZZ_SCRATCH/corpus/<target> from the committed seeds.
run_target() {
    local target=$1
    local corpus=$REPO/$FUZZ_SCRATCH/corpus/$target
    mkdir -p "$corpus" "$FINDINGS/$target"
    # Swift's backtracer would wait on a crash instead of letting libFuzzer write the reproducer.
    IMGD_FUZZ_TARGET=$target SWIFT_BACKTRACE=enable=no \
        ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
        "$BIN" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
        -print_final_stats=1 -artifact_prefix="$FINDINGS/$target/" $FUZZ_ARGS \
        "$corpus" "$REPO/Tests/Fuzz/Corpus/$target" >"$LOGS/$target.log" 2>&1
    local status=$?
    local runs execs
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$LOGS/$target.log" | grep -o '[0-9]*$')
    execs=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$LOGS/$target.log" | grep -o '[0-9]*$')
    local cov
    cov=$(grep -o 'cov: [0-9]*' "$LOGS/$target.log" | tail -1 | grep -o '[0-9]*')
    if [ "$status" -eq 0 ]; then
        echo "fuzz: $target: ok, ${runs:-?} runs in ${FUZZ_SECONDS} s (${execs:-?}/s), coverage ${cov:-?}, corpus $(ls "$corpus" | wc -l) files"
    else
        echo "fuzz: $target: FAILED (status $status); log $LOGS/$target.log; reproducer(s):"
        ls -1 "$FINDINGS/$target/" | sed "s|^|    fuzz-findings/$target/|"
        grep -m3 -E 'ERROR:|Fatal error|SUMMARY' "$LOGS/$target.log" | sed 's/^/    /'
    fi
    return $status
}
export -f run_target
export REPO FUZZ_SCRATCH FUZZ_SECONDS FUZZ_ARGS FINDINGS LOGS BIN

start=$(date +%s)
failed=0
# xargs runs FUZZ_JOBS targets at a time and exits 123 when any of them failed.
printf '%s\n' $FUZZ_TARGETS | xargs -P "$FUZZ_JOBS" -I{} bash -c 'run_target {}' || failed=1
echo "fuzz: $(echo $FUZZ_TARGETS | wc -w) targets, ${FUZZ_SECONDS} s each, $(( $(date +%s) - start )) s in all"
exit $failed
