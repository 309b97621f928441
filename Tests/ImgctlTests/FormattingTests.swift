import ImgdProtocol
import ImgdTestSupport
import Testing

@testable import ImgctlCLI

@Suite("Formatting", .offThePool)
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

    @Test("Prometheus: the daemon's stats, every counter with its own HELP, nested objects flattened, failures labelled by code")
    func prometheus() throws {
        let stats = RecordedReply.value(
            "stats",
            replacing: [
                "downloads": .int(120), "download_bytes": .int(7_340_032), "download_failures": .int(4), "retries": .int(6),
                "coalesced": .int(11), "failures": .object(["http_404": .int(3), "dns": .int(1)]), "memory.hits": .int(50),
                "disk.evicted": .int(4),
            ])
        let text = PrometheusExposition.render(counters: stats)
        // Every family the recorded reply yields, in sorted order, each with its own HELP text.
        let families = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        #expect(families == families.sorted())
        #expect(!text.contains("(from stats)"), "a counter the daemon sends has no HELP text of its own:\n\(text)")
        for (name, value) in [
            ("imgd_downloads_total", "120"), ("imgd_download_bytes_total", "7340032"), ("imgd_download_failures_total", "4"),
            ("imgd_retries_total", "6"), ("imgd_coalesced_total", "11"), ("imgd_memory_hits_total", "50"), ("imgd_disk_evicted_total", "4"),
        ] {
            #expect(text.contains("# TYPE \(name) counter\n\(name) \(value)\n"), "\(name) \(value) in:\n\(text)")
        }
        #expect(
            text.contains(
                """
                # HELP imgd_failures_total Downloads that failed, by error code.
                # TYPE imgd_failures_total counter
                imgd_failures_total{code="dns"} 1
                imgd_failures_total{code="http_404"} 3

                """))
        #expect(
            text.contains(
                """
                # HELP imgd_retries_total Download attempts repeated after a transient failure.
                # TYPE imgd_retries_total counter
                imgd_retries_total 6

                """))
    }

    @Test("Prometheus: a counter added later gets a generic HELP; label values and fractions are escaped and kept")
    func prometheusLaterCounters() throws {
        // The recorded reply with what a later daemon might add: a nested counter, a fraction,
        // a failure code that needs escaping.
        guard case .object(var members) = RecordedReply.value("stats") else {
            Issue.record("stats.json is not an object")
            return
        }
        members["failures"] = .object(["we\"ird": .int(2)])
        members["tier"] = .object(["deep": .int(2)])
        members["ratio"] = .double(0.5)
        let text = PrometheusExposition.render(counters: .object(members))
        #expect(
            text.contains(
                """
                imgd_failures_total{code="we\\"ird"} 2

                """))
        #expect(
            text.contains(
                """
                # HELP imgd_tier_deep_total imgd's tier_deep counter (from stats).
                # TYPE imgd_tier_deep_total counter
                imgd_tier_deep_total 2

                """))
        #expect(text.contains("imgd_ratio_total 0.5\n"))
    }

    @Test("stats in the human format")
    func statsLines() throws {
        let stats = RecordedReply.value(
            "stats",
            replacing: [
                "downloads": .int(1200), "download_bytes": .int(1536), "download_failures": .int(4), "retries": .int(6),
                "coalesced": .int(1), "failures": .object(["dns": .int(1), "http_404": .int(3)]), "memory.hits": .int(5),
            ])
        let lines = StatsCommand.lines(stats)
        for line in [
            "download bytes: 1.5 KiB", "download failures: 4", "downloads: 1,200", "failures: dns 1, http_404 3", "memory hits: 5",
            "retries: 6", "coalesced: 1",
        ] {
            #expect(lines.contains(line), "\(line) in \(lines)")
        }
        #expect(StatsCommand.lines(RecordedReply.value("stats", replacing: ["failures": .object([:])])).contains("failures: none"))
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
        let value = try #require((try? JSONValue(parsing: Array(#"{"a":1,"b":1.5,"c":true,"d":null,"e":[1,"x"],"f":"http://a/b"}"#.utf8))))
        #expect(value["a"] == .int(1))
        #expect(value["b"] == .double(1.5))
        #expect(value["c"] == .bool(true))
        #expect(value["d"] == .null)
        #expect(value["e"] == .array([.int(1), .string("x")]))
        #expect(value.jsonText == #"{"a":1,"b":1.5,"c":true,"d":null,"e":[1,"x"],"f":"http://a/b"}"#)
        #expect((try? JSONValue(parsing: Array("{".utf8))) == nil)
    }
}
