import ImgdProtocol

/// Turns the `stats` result into Prometheus' text exposition format (version 0.0.4), for the
/// node exporter's textfile collector or any scraper that reads a file.
///
/// Generic, so a counter the daemon adds later shows up without a change here: every number is
/// a counter named `imgd_` plus its path, nested objects joined by `_`, with `_total` appended
/// (`download_bytes` → `imgd_download_bytes_total`, `memory.hits` →
/// `imgd_memory_hits_total`). The objects in ``labelledObjects`` are maps from a label value
/// to a count instead, and become one family with a label (`failures.dns` →
/// `imgd_failures_total{code="dns"}`). Strings, booleans and arrays are skipped.
struct PrometheusRenderer {
    /// Objects whose keys are label values, not field names, with the label's name.
    static let labelledObjects: [String: String] = ["failures": "code"]

    /// HELP texts for the counters the daemon's `stats` sends today, by path (each one, and no
    /// other: ImgdIntegrationTests checks a real reply has no counter without its text); a
    /// counter added later gets a generic one.
    static let descriptions: [String: String] = [
        "downloads": "Images downloaded and stored.",
        "download_bytes": "Bytes of images downloaded and stored.",
        "failures": "Downloads that failed, by error code.",
        "memory_hits": "Requests answered from the memory tier.",
        "memory_misses": "Requests the memory tier could not answer.",
        "memory_purges": "Times the memory tier was emptied (memory pressure, purge).",
        "disk_hits": "Requests answered from the disk cache.",
        "disk_misses": "Requests the disk cache could not answer.",
        "disk_evicted": "Entries evicted from the disk cache.",
        "disk_expired": "Entries removed from the disk cache for age.",
        "download_failures": "Downloads that failed.",
        "gets": "get requests answered.",
        "coalesced": "Requests joined to a download already under way.",
        "revalidated": "Revalidations answered 304 Not Modified (the entry renewed, its file kept).",
        "retries": "Download attempts repeated after a transient failure.",
        "cancelled": "Downloads cancelled.",
        "preempted": "Prefetch transfers that gave their slot to an on-demand request or a waiting list (re-queued, not failed).",
        "paced_out": "Transfers ended early because their pace could not finish the declared body in time.",
        "throttled": "Times a transfer paused because max-rate's bucket was empty.",
        "tier_fallbacks": "Requests sent to the origin directly because the shared tier failed.",
        "pressure_events": "Memory-pressure events handled.",
        "events_dropped": "Events not sent to a slow subscriber.",
    ]

    /// The metric-name prefix.
    var prefix = "imgd"

    /// The exposition text for `stats`, ending in a newline; families in the order of their
    /// sorted paths, so the output is the same for the same counters.
    func render(_ stats: JSONValue) -> String {
        var families: [(name: String, path: String, samples: [String])] = []
        collect(stats, path: [], into: &families)
        var text = ""
        for family in families {
            let help = Self.descriptions[family.path] ?? "imgd's \(family.path) counter (from stats)."
            text += "# HELP \(family.name) \(Self.escapeHelp(help))\n"
            text += "# TYPE \(family.name) counter\n"
            for sample in family.samples { text += sample + "\n" }
        }
        return text
    }

    private func collect(
        _ value: JSONValue, path: [String], into families: inout [(name: String, path: String, samples: [String])]
    ) {
        switch value {
        case .object(let members):
            let joined = path.map(Self.sanitize).joined(separator: "_")
            if let label = Self.labelledObjects[joined] {
                let name = metricName(path)
                var samples: [String] = []
                for key in members.keys.sorted() {
                    guard let number = members[key].flatMap(Self.number) else { continue }
                    samples.append("\(name){\(label)=\"\(Self.escapeLabel(key))\"} \(number)")
                }
                families.append((name, joined, samples))
                return
            }
            for key in members.keys.sorted() {
                collect(members[key]!, path: path + [key], into: &families)
            }
        case .int, .double:
            guard !path.isEmpty, let number = Self.number(value) else { return }
            let name = metricName(path)
            families.append((name, path.map(Self.sanitize).joined(separator: "_"), ["\(name) \(number)"]))
        case .null, .bool, .string, .array:
            return
        }
    }

    /// `imgd_<path joined by _>_total`.
    private func metricName(_ path: [String]) -> String {
        let base = ([prefix] + path.map(Self.sanitize)).joined(separator: "_")
        return base.hasSuffix("_total") ? base : base + "_total"
    }

    /// A name part that Prometheus accepts: `[a-zA-Z0-9_]`, anything else becomes `_`.
    static func sanitize(_ part: String) -> String {
        String(
            part.unicodeScalars.map { scalar in
                scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "_")
                    ? Character(scalar) : "_"
            })
    }

    /// A sample value: integers as written, fractions in Swift's shortest round-trip form.
    static func number(_ value: JSONValue) -> String? {
        switch value {
        case .int(let number): return String(number)
        case .double(let number):
            if number.isNaN { return "NaN" }
            if number.isInfinite { return number > 0 ? "+Inf" : "-Inf" }
            return String(number)
        default: return nil
        }
    }

    /// Label values escape backslash, double quote and newline.
    static func escapeLabel(_ text: String) -> String {
        text.replacingAll("\\", with: "\\\\").replacingAll("\"", with: "\\\"").replacingAll("\n", with: "\\n")
    }

    /// HELP texts escape backslash and newline.
    static func escapeHelp(_ text: String) -> String {
        text.replacingAll("\\", with: "\\\\").replacingAll("\n", with: "\\n")
    }
}

extension String {
    /// Every occurrence of `target` replaced (without Foundation).
    fileprivate func replacingAll(_ target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
