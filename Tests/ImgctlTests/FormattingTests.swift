import Testing

@testable import ImgctlCLI

@Suite("Formatting")
struct FormattingTests {
    @Test("sizes in binary units")
    func sizes() {
        #expect(HumanFormat.size(0) == "0 B")
        #expect(HumanFormat.size(1023) == "1023 B")
        #expect(HumanFormat.size(1024) == "1 KiB")
        #expect(HumanFormat.size(1536) == "1.5 KiB")
        #expect(HumanFormat.size(64 << 20) == "64 MiB")
        #expect(HumanFormat.size(1_288_490_189) == "1.2 GiB")
        #expect(HumanFormat.size((1 << 20) - 1) == "1 MiB")  // 1023.999 KiB rounds up a unit
    }

    @Test("durations in at most two units")
    func durations() {
        #expect(HumanFormat.duration(seconds: 0) == "0s")
        #expect(HumanFormat.duration(seconds: 0.42) == "0.4s")
        #expect(HumanFormat.duration(seconds: 12) == "12s")
        #expect(HumanFormat.duration(seconds: 250) == "4m 10s")
        #expect(HumanFormat.duration(seconds: 3600) == "1h")
        #expect(HumanFormat.duration(seconds: 3 * 3600 + 12 * 60 + 59) == "3h 12m")
        #expect(HumanFormat.duration(seconds: 2 * 86_400 + 5 * 3600) == "2d 5h")
        #expect(HumanFormat.duration(seconds: -1) == "-")
    }

    @Test("moments: epoch milliseconds or seconds as an age, text as given")
    func moments() {
        let now = 1_800_000_000.0
        #expect(HumanFormat.moment(.int(1_799_999_990_000), now: now) == "10s ago")
        #expect(HumanFormat.moment(.int(1_799_996_400), now: now) == "1h ago")
        #expect(HumanFormat.moment(.string("2025-01-02T03:04:05Z"), now: now) == "2025-01-02T03:04:05Z")
        #expect(HumanFormat.moment(nil, now: now) == "-")
    }

    @Test("counts with thousands separators")
    func counts() {
        #expect(HumanFormat.count(0) == "0")
        #expect(HumanFormat.count(999) == "999")
        #expect(HumanFormat.count(1000) == "1,000")
        #expect(HumanFormat.count(1_234_567) == "1,234,567")
        #expect(HumanFormat.count(-1234) == "-1,234")
    }

    @Test("Prometheus: nested objects flattened, counters as _total, failures labelled by code")
    func prometheus() throws {
        let stats = try #require(
            JSONValue.parse(
                Array(
                    #"""
                    {"downloads":120,"download_bytes":7340032,"failures":{"http_404":3,"dns":1,"we\"ird":2},
                     "memory":{"hits":50,"misses":70,"purges":1},"disk":{"hits":9,"misses":0,"evicted":4,"expired":0,
                     "tier":{"deep":2}},"lists_done":2,"lists_failed":0,"events_dropped":0,"version":"0.2.0",
                     "ratio":0.5}
                    """#.utf8)))
        let text = PrometheusRenderer().render(stats)
        #expect(
            text == """
                # HELP imgd_disk_evicted_total Entries evicted from the disk cache.
                # TYPE imgd_disk_evicted_total counter
                imgd_disk_evicted_total 4
                # HELP imgd_disk_expired_total Entries removed from the disk cache for age.
                # TYPE imgd_disk_expired_total counter
                imgd_disk_expired_total 0
                # HELP imgd_disk_hits_total Requests answered from the disk cache.
                # TYPE imgd_disk_hits_total counter
                imgd_disk_hits_total 9
                # HELP imgd_disk_misses_total Requests the disk cache could not answer.
                # TYPE imgd_disk_misses_total counter
                imgd_disk_misses_total 0
                # HELP imgd_disk_tier_deep_total imgd's disk_tier_deep counter (from stats).
                # TYPE imgd_disk_tier_deep_total counter
                imgd_disk_tier_deep_total 2
                # HELP imgd_download_bytes_total Bytes of images downloaded and stored.
                # TYPE imgd_download_bytes_total counter
                imgd_download_bytes_total 7340032
                # HELP imgd_downloads_total Images downloaded and stored.
                # TYPE imgd_downloads_total counter
                imgd_downloads_total 120
                # HELP imgd_events_dropped_total Events not sent to a slow subscriber.
                # TYPE imgd_events_dropped_total counter
                imgd_events_dropped_total 0
                # HELP imgd_failures_total Downloads that failed, by error code.
                # TYPE imgd_failures_total counter
                imgd_failures_total{code="dns"} 1
                imgd_failures_total{code="http_404"} 3
                imgd_failures_total{code="we\\"ird"} 2
                # HELP imgd_lists_done_total Link lists finished with every URL cached.
                # TYPE imgd_lists_done_total counter
                imgd_lists_done_total 2
                # HELP imgd_lists_failed_total Link lists finished with a failure (or cancelled).
                # TYPE imgd_lists_failed_total counter
                imgd_lists_failed_total 0
                # HELP imgd_memory_hits_total Requests answered from the memory tier.
                # TYPE imgd_memory_hits_total counter
                imgd_memory_hits_total 50
                # HELP imgd_memory_misses_total Requests the memory tier could not answer.
                # TYPE imgd_memory_misses_total counter
                imgd_memory_misses_total 70
                # HELP imgd_memory_purges_total Times the memory tier was emptied (memory pressure, purge).
                # TYPE imgd_memory_purges_total counter
                imgd_memory_purges_total 1
                # HELP imgd_ratio_total imgd's ratio counter (from stats).
                # TYPE imgd_ratio_total counter
                imgd_ratio_total 0.5

                """)
    }

    @Test("stats in the human format")
    func statsLines() throws {
        let stats = try #require(
            JSONValue.parse(Array(#"{"downloads":1200,"download_bytes":1536,"failures":{"dns":1,"http_404":3},"memory":{"hits":5}}"#.utf8)))
        #expect(
            StatsCommand.lines(stats) == [
                "download bytes: 1.5 KiB", "downloads: 1,200", "failures: dns 1, http_404 3", "memory hits: 5",
            ])
        #expect(StatsCommand.lines(.object(["failures": .object([:])])) == ["failures: none"])
    }

    @Test("events as `seq event key=value…`, quoting only what needs it")
    func events() {
        let event = ControlEvent(
            name: "evicted", seq: 12,
            data: .object(["count": .int(3), "reason": .string("size"), "note": .string("a b"), "empty": .string("")]), raw: "")
        #expect(EventFormatter.line(event) == #"12 evicted count=3 empty="" note="a b" reason=size"#)
    }

    @Test("JSON values keep integers, fractions and booleans apart")
    func jsonValues() throws {
        let value = try #require(JSONValue.parse(Array(#"{"a":1,"b":1.5,"c":true,"d":null,"e":[1,"x"],"f":"http://a/b"}"#.utf8)))
        #expect(value["a"] == .int(1))
        #expect(value["b"] == .double(1.5))
        #expect(value["c"] == .bool(true))
        #expect(value["d"] == .null)
        #expect(value["e"] == .array([.int(1), .string("x")]))
        #expect(value.compactText == #"{"a":1,"b":1.5,"c":true,"d":null,"e":[1,"x"],"f":"http://a/b"}"#)
        #expect(JSONValue.parse(Array("{".utf8)) == nil)
    }
}
