import ImgdProtocol
@testable import ImgctlCLI
import ImgdTestSupport
import Testing

/// The one Prometheus renderer (`imgctl stats --prometheus`, the HTTP face's `/metrics`) on
/// snapshots written by hand: exact text, so a change in the format is a change here.
@Suite("Prometheus exposition", .offThePool)
struct PrometheusExpositionTests {
    @Test("a whole snapshot: families sorted by name across kinds, gauges without _total, labels by tier, info gauges")
    func wholeSnapshot() {
        let snapshot: JSONValue = [
            "counters": ["gets": 3, "failures": ["dns": 1]],
            "gauges": ["uptime_seconds": 12, "stored_bytes": ["memory": 5, "disk": 9]],
            "info": ["version": "1.2.3", "degraded": ["cache_lock_lost"]],
        ]
        #expect(
            PrometheusExposition.render(snapshot) == """
                # HELP imgd_build_info The daemon's version; always 1.
                # TYPE imgd_build_info gauge
                imgd_build_info{version="1.2.3"} 1
                # HELP imgd_degraded 1 for each degraded condition the daemon reports (status.degraded), by code.
                # TYPE imgd_degraded gauge
                imgd_degraded{code="cache_lock_lost"} 1
                # HELP imgd_failures_total Downloads that failed, by error code.
                # TYPE imgd_failures_total counter
                imgd_failures_total{code="dns"} 1
                # HELP imgd_gets_total get requests answered.
                # TYPE imgd_gets_total counter
                imgd_gets_total 3
                # HELP imgd_stored_bytes Bytes stored, by tier (status.cache.bytes, status.memory.bytes).
                # TYPE imgd_stored_bytes gauge
                imgd_stored_bytes{tier="disk"} 9
                imgd_stored_bytes{tier="memory"} 5
                # HELP imgd_uptime_seconds Seconds since the daemon started.
                # TYPE imgd_uptime_seconds gauge
                imgd_uptime_seconds 12

                """)
    }

    @Test("a histogram: buckets cumulative and ending +Inf, _count equal to the +Inf bucket, series sorted by labels")
    func histogram() {
        let snapshot: JSONValue = [
            "histograms": [
                "get_duration_seconds": [
                    "bounds": [0.0001, 0.5, 1],
                    "series": [
                        ["labels": ["source": "network", "face": "control"], "counts": [0, 2, 1, 4], "sum": 21.5],
                        ["labels": ["source": "memory", "face": "control"], "counts": [7, 0, 0, 0], "sum": 0.00035],
                    ],
                ]
            ]
        ]
        #expect(
            PrometheusExposition.render(snapshot) == """
                # HELP imgd_get_duration_seconds Time to answer a get, from its request to its reply, by face (control, http) and source (memory, disk, network, error).
                # TYPE imgd_get_duration_seconds histogram
                imgd_get_duration_seconds_bucket{face="control",source="memory",le="0.0001"} 7
                imgd_get_duration_seconds_bucket{face="control",source="memory",le="0.5"} 7
                imgd_get_duration_seconds_bucket{face="control",source="memory",le="1"} 7
                imgd_get_duration_seconds_bucket{face="control",source="memory",le="+Inf"} 7
                imgd_get_duration_seconds_sum{face="control",source="memory"} 0.00035
                imgd_get_duration_seconds_count{face="control",source="memory"} 7
                imgd_get_duration_seconds_bucket{face="control",source="network",le="0.0001"} 0
                imgd_get_duration_seconds_bucket{face="control",source="network",le="0.5"} 2
                imgd_get_duration_seconds_bucket{face="control",source="network",le="1"} 3
                imgd_get_duration_seconds_bucket{face="control",source="network",le="+Inf"} 7
                imgd_get_duration_seconds_sum{face="control",source="network"} 21.5
                imgd_get_duration_seconds_count{face="control",source="network"} 7

                """)
    }

    @Test("escaping: label values (backslash, quote, newline) and HELP texts; a name part outside [a-zA-Z0-9_] becomes _")
    func escaping() {
        let snapshot: JSONValue = [
            "counters": ["failures": ["a\\b\"c\nd": 1], "odd-name.x": 2],
            "info": ["version": "v\"1\"\n"],
        ]
        let text = PrometheusExposition.render(snapshot)
        #expect(text.contains(#"imgd_failures_total{code="a\\b\"c\nd"} 1"# + "\n"), "\(text)")
        #expect(text.contains(#"imgd_build_info{version="v\"1\"\n"} 1"# + "\n"), "\(text)")
        #expect(text.contains("# TYPE imgd_odd_name_x_total counter\nimgd_odd_name_x_total 2\n"), "\(text)")
        #expect(PrometheusExposition.escapeHelp("a\\b\nc\"") == #"a\\b\nc""#)
    }

    @Test("a series whose counts do not match the bounds is left out, not written wrong")
    func malformedHistogram() {
        let snapshot: JSONValue = [
            "histograms": ["h": ["bounds": [1, 2], "series": [["labels": [:], "counts": [1, 2], "sum": 1]]]]
        ]
        #expect(PrometheusExposition.render(snapshot) == "# HELP imgd_h imgd's h histogram (from metrics).\n# TYPE imgd_h histogram\n")
    }
}

/// `imgctl stats --prometheus` against a stand-in daemon: `metrics` first, `stats` from an
/// older daemon that does not know it.
@Suite("imgctl stats --prometheus", .offThePool)
struct StatsPrometheusCommandTests {
    @Test("sends metrics and prints its snapshot through the renderer")
    func metrics() throws {
        let server = try ScriptedControlServer { request in
            [.line(ScriptedControlServer.success(request.id, #"{"counters":{"gets":4},"gauges":{"downloads_in_flight":2}}"#))]
        }
        defer { server.stop() }
        let run = ImgctlRun(["stats", "--prometheus", "--socket", server.path])
        #expect(run.status == 0, "\(run.stderr.text)")
        #expect(server.received.map(\.command) == ["metrics"])
        #expect(
            run.stdout.text == PrometheusExposition.render(["counters": ["gets": 4], "gauges": ["downloads_in_flight": 2]]))
        #expect(run.stdout.text.contains("imgd_downloads_in_flight 2\n") && run.stdout.text.contains("imgd_gets_total 4\n"))
    }

    @Test("the daemon's recorded metrics reply: every family with its own HELP text, histograms with all 19 buckets")
    func recordedReply() {
        let text = PrometheusExposition.render(RecordedReply.value("metrics"))
        #expect(!text.contains("(from stats)") && !text.contains("(from metrics)"), "a family without its own HELP text:\n\(text)")
        #expect(text.split(separator: "\n").filter { $0.hasPrefix("imgd_get_duration_seconds_bucket{") }.count == 8 * 19)
        #expect(text.contains(#"imgd_transfer_duration_seconds_bucket{result="ok",le="+Inf"} "#))
    }

    @Test("an older daemon answers unknown_command: stats, its counters rendered the same way")
    func olderDaemon() throws {
        let server = try ScriptedControlServer { request in
            if request.command == "metrics" {
                return [.line(ScriptedControlServer.failure(request.id, "unknown_command", "unknown command metrics"))]
            }
            return [.line(ScriptedControlServer.success(request.id, #"{"gets":4,"failures":{"dns":1}}"#))]
        }
        defer { server.stop() }
        let run = ImgctlRun(["stats", "--prometheus", "--socket", server.path])
        #expect(run.status == 0, "\(run.stderr.text)")
        #expect(server.received.map(\.command) == ["metrics", "stats"])
        #expect(run.stdout.text == PrometheusExposition.render(counters: ["gets": 4, "failures": ["dns": 1]]))
    }

    @Test("any other error is the command's error")
    func otherError() throws {
        let server = try ScriptedControlServer { request in
            [.line(ScriptedControlServer.failure(request.id, "internal", "broken"))]
        }
        defer { server.stop() }
        let run = ImgctlRun(["stats", "--prometheus", "--socket", server.path])
        #expect(run.status == 1)
        #expect(server.received.map(\.command) == ["metrics"])
        #expect(run.stderr.text.contains("internal"), "\(run.stderr.text)")
    }

    @Test("escaping works on scalars: a CRLF in a label value or help text has its newline escaped; names need no change to be kept")
    func escapingScalars() {
        #expect(PrometheusExposition.escapeLabel("a\r\nb\"c\\") == "a\r\\nb\\\"c\\\\")
        #expect(PrometheusExposition.escapeHelp("x\r\ny") == "x\r\\ny")
        #expect(PrometheusExposition.escapeLabel("plain") == "plain")
        #expect(PrometheusExposition.sanitize("get_duration") == "get_duration")
        #expect(PrometheusExposition.sanitize("é-x.y") == "__x_y")
    }
}
