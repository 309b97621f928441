# Shared by run-sanitized-tests.sh and sanitized-crash-loop.sh (sourced, not run).

# sanitizer_short KIND: tsan or asan for thread or address; exits 2 on anything else.
sanitizer_short() {
    case $1 in
    thread) echo tsan ;;
    address) echo asan ;;
    *) echo "unknown sanitizer: $1 (thread or address)" >&2; exit 2 ;;
    esac
}

# export_sanitizer_options KIND REPORTS REPO: every report to a file under REPORTS (the
# environment is inherited by every child, so a daemon's reports land there too), with the
# suppressions in REPO/Tests/Sanitizers/, each of which carries the proof that its report is false.
export_sanitizer_options() {
    case $1 in
    thread)
        export TSAN_OPTIONS="log_path=$2/tsan second_deadlock_stack=1 suppressions=$3/Tests/Sanitizers/tsan.supp ${TSAN_OPTIONS:-}"
        ;;
    address)
        # Leak checking stays off: the test runner keeps what it allocates for every test until
        # it exits, and a SIGKILLed daemon never gets to it (the fuzz targets run with it on).
        export ASAN_OPTIONS="log_path=$2/asan detect_leaks=0 ${ASAN_OPTIONS:-}"
        ;;
    esac
    # A crash must end the process at once, not wait for Swift's interactive backtracer.
    export SWIFT_BACKTRACE=enable=no
}

# report_findings PREFIX REPORTS: lists each report file's findings; status 1 when there is any.
report_findings() {
    local reports
    reports=$(find "$2" -type f | sort)
    [ -n "$reports" ] || return 0
    echo "$1: $(echo "$reports" | wc -l) sanitizer report file(s):"
    for report in $reports; do
        echo "== $report"
        grep -E '^(WARNING|ERROR|SUMMARY): ' "$report" | sort | uniq -c | head -20
    done
    return 1
}
