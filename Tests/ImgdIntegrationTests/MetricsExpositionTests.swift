import Foundation
import ImgdProtocol
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The `metrics` command and `imgctl stats --prometheus` against the real daemon: histograms
/// that move with real `get`s, and text that Prometheus' own linter accepts.
@Suite("Metrics against the real daemon", .timeLimit(.minutes(10)), .offThePool)
struct MetricsExpositionTests {
    static let promtool = "/usr/bin/promtool"

    @Test("get latency counts one get per source (memory, disk, network, error) and transfer durations by result")
    func histogramsMove() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start()
        let daemon = try await DaemonProcess.start(in: scratch.path)
        defer { daemon.killIfRunning() }

        var before = try await Self.snapshot(daemon)
        // A miss fetched from the origin.
        _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/one.png"))"}"#)
        var after = try await Self.snapshot(daemon)
        #expect(Self.delta(before, after) == ["network": 1], "\(after)")
        #expect(Self.transfers(after, "ok") - Self.transfers(before, "ok") == 1)

        // Again: the fetch left it in the memory tier.
        before = after
        _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/one.png"))"}"#)
        after = try await Self.snapshot(daemon)
        #expect(Self.delta(before, after) == ["memory": 1], "\(after)")

        // From disk: an image an add stored (on disk only), asked for once it is there.
        _ = try await daemon.result(#"{"cmd":"add","urls":["\#(server.url("/img/two.png"))"]}"#)
        #expect(await eventually { (try? await daemon.result(#"{"cmd":"stats"}"#))?["downloads"] as? Int == 2 })
        before = try await Self.snapshot(daemon)
        _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/two.png"))"}"#)
        after = try await Self.snapshot(daemon)
        #expect(Self.delta(before, after) == ["disk": 1], "\(after)")

        // A failure: the origin says 404 (a failed transfer), and a get refused at once.
        before = after
        let failed = try await daemon.call(#"{"cmd":"get","url":"\#(server.url("/status/404"))"}"#)
        #expect(failed["ok"] as? Bool == false, "\(failed)")
        _ = try await daemon.call(#"{"cmd":"get","url":"\#(server.url("/img/never.png"))","fetch":false}"#)
        after = try await Self.snapshot(daemon)
        #expect(Self.delta(before, after) == ["error": 2], "\(after)")
        #expect(Self.transfers(after, "failed") - Self.transfers(before, "failed") == 1)

        // A get that only queues (wait: false) is no lookup: not counted.
        before = after
        _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/later.png"))","wait":false}"#)
        after = try await Self.snapshot(daemon)
        #expect(Self.delta(before, after) == [:], "\(after)")

        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        try await server.shutdown()
    }

    @Test(
        "imgctl stats --prometheus: every family with its HELP, cumulative buckets, and promtool check metrics finds nothing",
        .enabled(if: FileManager.default.isExecutableFile(atPath: promtool), "needs promtool (Debian package prometheus)"))
    func promtoolAccepts() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start()
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-rate", "10MiB"])
        defer { daemon.killIfRunning() }
        _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/one.png"))"}"#)
        _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/one.png"))"}"#)
        _ = try await daemon.call(#"{"cmd":"get","url":"\#(server.url("/status/404"))"}"#)

        let output = try await BinaryRunner.imgctl(["stats", "--prometheus", "--socket", daemon.socket], in: scratch.path)
        #expect(output.status == 0, "\(output.stderr)")
        let text = output.stdout
        let file = scratch.path + "/imgd.prom"
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        // promtool exits 3 on lint findings; any line it prints is a finding.
        let check = try await ChildProcess.run("/bin/sh", ["-c", "\(Self.promtool) check metrics < \(file)"], in: scratch.path)
        #expect(check.status == 0 && check.stdout.isEmpty && check.stderr.isEmpty, "promtool: \(check.stdout)\(check.stderr)\n\(text)")

        // Counters keep their names; gauges of status, labels by tier and code; the info gauges.
        for line in [
            "# TYPE imgd_gets_total counter", "# TYPE imgd_memory_hits_total counter", "# TYPE imgd_downloads_total counter",
            #"imgd_failures_total{code="http_404"} 1"#, "# TYPE imgd_downloads_in_flight gauge", "# TYPE imgd_uptime_seconds gauge",
            #"imgd_stored_entries{tier="disk"} 1"#, #"imgd_stored_entries{tier="memory"} "#, #"imgd_limit_bytes{tier="disk"} "#,
            "imgd_max_rate_bytes_per_second 10485760", #"imgd_build_info{version=""#,
            "# TYPE imgd_get_duration_seconds histogram", "# TYPE imgd_transfer_duration_seconds histogram",
            #"imgd_get_duration_seconds_count{face="control",source="network"} 1"#,
            #"imgd_get_duration_seconds_count{face="control",source="error"} 1"#,
            #"imgd_transfer_duration_seconds_count{result="failed"} 1"#,
        ] {
            #expect(text.contains(line), "no \(line) in:\n\(text)")
        }
        #expect(!text.contains("(from stats)") && !text.contains("(from metrics)"), "a family without its own HELP text:\n\(text)")
        // Each series: buckets cumulative, ending +Inf, whose count is _count's.
        var previous: [String: Int] = [:]
        var infinite: [String: Int] = [:]
        for line in text.split(separator: "\n") where line.contains("_bucket{") {
            let parts = line.split(separator: " ")
            let series = String(parts[0].replacing(/,?le="[^"]*"/, with: ""))
            let count = Int(parts[1]) ?? -1
            #expect(count >= previous[series, default: 0], "not cumulative: \(line)")
            previous[series] = count
            if line.contains(#"le="+Inf""#) { infinite[series] = count }
        }
        #expect(infinite.count == 10, "\(infinite)")  // 8 get series + 2 transfer series
        for (series, count) in infinite {
            let name = series.replacing("_bucket", with: "_count").replacing("{}", with: "")
            #expect(text.contains("\(name) \(count)\n"), "\(name) is not \(count)")
        }

        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        try await server.shutdown()
    }

    @Test(
        "a second uid in the socket's group reads the metrics like stats; the text names no path, URL or peer",
        .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to run imgctl as a second uid"))
    func secondUser() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start()
        chmod(scratch.path, 0o755)
        let socket = scratch.path + "/imgd.sock"
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--socket", socket], socket: socket)
        defer { daemon.killIfRunning() }
        try OtherUser.share(socket)
        _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/one.png"))"}"#)
        _ = try await daemon.call(#"{"cmd":"get","url":"\#(server.url("/status/404"))"}"#)
        let output = try await OtherUser.plain.imgctl(["stats", "--prometheus"], socket: daemon.socket)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.contains(#"imgd_get_duration_seconds_count{face="control",source="network"} 1"#), "\(output.stdout)")
        for secret in [scratch.path, "127.0.0.1", "/img/one.png", "uid"] {
            #expect(!output.stdout.contains(secret), "\(secret) in:\n\(output.stdout)")
        }
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        try await server.shutdown()
    }

    // MARK: Reading the snapshot

    static func snapshot(_ daemon: DaemonProcess) async throws -> [String: Any] {
        try await daemon.result(#"{"cmd":"metrics"}"#)
    }

    /// The control face's get counts by source, from the `get_duration_seconds` histogram.
    static func gets(_ snapshot: [String: Any]) -> [String: Int] {
        let histograms = snapshot["histograms"] as? [String: Any]
        let series = (histograms?["get_duration_seconds"] as? [String: Any])?["series"] as? [[String: Any]] ?? []
        var counts: [String: Int] = [:]
        for entry in series {
            let labels = entry["labels"] as? [String: String] ?? [:]
            guard labels["face"] == "control", let source = labels["source"] else { continue }
            counts[source] = (entry["counts"] as? [Int] ?? []).reduce(0, +)
        }
        return counts
    }

    /// The sources whose count changed, by how much.
    static func delta(_ before: [String: Any], _ after: [String: Any]) -> [String: Int] {
        let old = gets(before), new = gets(after)
        var changed: [String: Int] = [:]
        for source in ["memory", "disk", "network", "error"] where new[source, default: 0] != old[source, default: 0] {
            changed[source] = new[source, default: 0] - old[source, default: 0]
        }
        return changed
    }

    static func transfers(_ snapshot: [String: Any], _ result: String) -> Int {
        let histograms = snapshot["histograms"] as? [String: Any]
        let series = (histograms?["transfer_duration_seconds"] as? [String: Any])?["series"] as? [[String: Any]] ?? []
        let entry = series.first { ($0["labels"] as? [String: String])?["result"] == result }
        return (entry?["counts"] as? [Int] ?? []).reduce(0, +)
    }
}
