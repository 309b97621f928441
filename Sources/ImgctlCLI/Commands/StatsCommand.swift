import ArgumentParser
import ImgdProtocol

/// `imgctl stats`: the daemon's counters since it started.
struct StatsCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show the daemon's counters since it started.",
        discussion: """
            --prometheus prints the daemon's metrics (the metrics command) in Prometheus' text \
            format, the same text as the HTTP face's /metrics: each counter as \
            imgd_<name>_total (nested names joined by _, e.g. imgd_memory_hits_total), failures \
            as imgd_failures_total{code="..."}, the gauges of status (imgd_stored_bytes{tier=...}, \
            imgd_downloads_queued, ...), and the histograms imgd_get_duration_seconds{face,source} \
            and imgd_transfer_duration_seconds{result}. An older daemon without metrics gives \
            its counters only. For the node exporter's textfile collector: \
            imgctl stats --prometheus > imgd.prom.tmp && mv imgd.prom.tmp imgd.prom
            """)

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Print Prometheus' text exposition format.")
    var prometheus = false

    func validate() throws {
        if prometheus, connection.json {
            throw ValidationError("--prometheus and --json are two different formats: pick one.")
        }
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        if prometheus {
            context.standardOutput.write(try Self.exposition(session))
            return
        }
        let result = try session.call("stats")
        if session.json { return }
        for line in Self.lines(result) { session.output(line) }
    }

    /// The `metrics` snapshot rendered; from an older daemon without `metrics`
    /// (`unknown_command`), its `stats` counters alone.
    static func exposition(_ session: ControlSession) throws(ImgctlError) -> String {
        do {
            return PrometheusExposition.render(try session.call("metrics"))
        } catch .daemon(code: "unknown_command", _) {
            return PrometheusExposition.render(counters: try session.call("stats"))
        }
    }

    /// `key: value` lines, nested objects flattened with spaces (`memory hits: 12`); sizes
    /// humanised for keys that count bytes; the failures map on one line.
    static func lines(_ stats: JSONValue, path: [String] = []) -> [String] {
        guard case .object(let members) = stats else { return [] }
        var lines: [String] = []
        for key in members.keys.sorted() {
            let value = members[key]!
            let name = (path + [key]).joined(separator: " ").replacingUnderscores()
            if PrometheusExposition.counterLabels[key] != nil, path.isEmpty, case .object(let counts) = value {
                let parts = counts.keys.sorted().map { code in
                    "\(code) " + (counts[code]!.intValue.map(HumanFormat.count) ?? counts[code]!.jsonText)
                }
                lines.append("\(name): " + (parts.isEmpty ? "none" : parts.joined(separator: ", ")))
            } else if case .object = value {
                lines += self.lines(value, path: path + [key])
            } else if let number = value.intValue {
                lines.append("\(name): " + (key.contains("bytes") ? HumanFormat.size(number) : HumanFormat.count(number)))
            } else {
                lines.append("\(name): \(EventFormatter.text(value))")
            }
        }
        return lines
    }
}

extension String {
    /// `download_bytes` → `download bytes`.
    fileprivate func replacingUnderscores() -> String {
        String(map { $0 == "_" ? " " : $0 })
    }
}
