/// Turns the daemon's `metrics` snapshot into Prometheus' text exposition format (version
/// 0.0.4): the one renderer of `imgctl stats --prometheus` and the HTTP face's `GET /metrics`.
///
/// The snapshot (Protocol.md, `metrics`) is `{"counters", "gauges", "histograms", "info"}`:
/// - `counters`: the `stats` object. Every number is a counter named `imgd_` plus its path,
///   nested objects joined by `_`, with `_total` appended (`download_bytes` →
///   `imgd_download_bytes_total`, `memory.hits` → `imgd_memory_hits_total`).
/// - `gauges`: numbers named the same way without `_total` (`uptime_seconds` →
///   `imgd_uptime_seconds`).
/// - `histograms`: `{name: {"bounds": [seconds…], "series": [{"labels": {…}, "counts": [per
///   bucket, not cumulative, one more than bounds], "sum": seconds}]}}`, written as
///   `_bucket{le}` (cumulative, ending `+Inf`), `_sum` and `_count` (the `+Inf` bucket's).
/// - `info`: strings (or arrays of strings) that become a label of a constant 1
///   (`version` → `imgd_build_info{version="…"} 1`).
///
/// Generic, so a number the daemon adds later shows up without a change here (with a generic
/// HELP). Objects listed in ``counterLabels`` and ``gaugeLabels`` are maps from a label value to
/// a number and become one family with that label (`failures.dns` →
/// `imgd_failures_total{code="dns"}`). Strings, booleans and arrays among the numbers are
/// skipped. Families come sorted by name, series by their labels, so the same snapshot gives
/// the same text.
public enum PrometheusExposition {
    /// Counter objects whose keys are label values, not field names, with the label's name.
    public static let counterLabels: [String: String] = ["failures": "code"]
    /// Gauge objects whose keys are label values, with the label's name.
    public static let gaugeLabels: [String: String] = [
        "stored_bytes": "tier", "stored_entries": "tier", "limit_bytes": "tier",
    ]

    /// HELP texts for the counters the daemon's `stats` sends today, by path (each one, and no
    /// other: ImgdIntegrationTests checks a real reply has no counter without its text); a
    /// counter added later gets a generic one.
    public static let counterHelp: [String: String] = [
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

    /// HELP texts for the gauges of `metrics`, by path.
    public static let gaugeHelp: [String: String] = [
        "uptime_seconds": "Seconds since the daemon started.",
        "downloads_queued": "Downloads waiting for a slot or for their next attempt (status.queued).",
        "downloads_in_flight": "Transfers running now (status.in_flight).",
        "requests_held": "Requests held against max-queued (status.held).",
        "requests_held_bytes": "Bytes of URLs held against max-queued-bytes (status.held_bytes).",
        "lists_active": "Lists being warmed (status.lists_active; refreshed at most once a second).",
        "lists_waiting": "Claimed lists waiting for their turn (status.lists_waiting; refreshed at most once a second).",
        "stored_bytes": "Bytes stored, by tier (status.cache.bytes, status.memory.bytes).",
        "stored_entries": "Entries stored, by tier (the disk's refreshed at most once a second).",
        "limit_bytes": "The size limit, by tier (disk-limit, memory-limit).",
        "pinned_bytes": "Bytes of pinned disk entries (status.cache.pinned_bytes; refreshed at most once a second).",
        "transfers_throttled": "Transfers paused now by max-rate (status.throttled_now).",
        "max_rate_bytes_per_second": "The max-rate setting; absent when there is no cap.",
    ]

    /// HELP texts for the histograms of `metrics`, by name.
    public static let histogramHelp: [String: String] = [
        "get_duration_seconds": "Time to answer a get, from its request to its reply, by face (control, http) and source (memory, disk, network, error).",
        "transfer_duration_seconds": "Time a transfer took on the wire (redirects included), by result (ok, failed).",
    ]

    /// How each member of `info` is written: the metric's name (after the prefix), the label
    /// that carries the text, and the HELP text.
    public static let infoMetrics: [String: (name: String, label: String, help: String)] = [
        "version": ("build_info", "version", "The daemon's version; always 1."),
        "pressure_source": ("memory_pressure_source_info", "source", "Where memory pressure is read from (status.memory.pressure_source); always 1."),
        "max_rate_applies_to": ("max_rate_applies_to_info", "applies_to", "What max-rate caps (status.max_rate_applies_to); always 1."),
        "degraded": ("degraded", "code", "1 for each degraded condition the daemon reports (status.degraded), by code."),
    ]

    /// The exposition text for a `metrics` snapshot, ending in a newline (or empty).
    public static func render(_ snapshot: JSONValue, prefix: String = "imgd") -> String {
        var families: [Family] = []
        if let counters = snapshot["counters"] {
            collect(counters, path: [], kind: .counter, prefix: prefix, into: &families)
        }
        if let gauges = snapshot["gauges"] {
            collect(gauges, path: [], kind: .gauge, prefix: prefix, into: &families)
        }
        if case .object(let histograms)? = snapshot["histograms"] {
            for (name, histogram) in histograms {
                if let family = histogramFamily(name, histogram, prefix: prefix) { families.append(family) }
            }
        }
        if case .object(let info)? = snapshot["info"] {
            for (key, value) in info {
                if let family = infoFamily(key, value, prefix: prefix) { families.append(family) }
            }
        }
        families.sort { $0.name < $1.name }
        var text = ""
        // One allocation for the whole text (about 64 bytes a sample), not one per doubling.
        text.reserveCapacity(families.reduce(0) { $0 + 160 + 64 * $1.samples.count })
        for family in families {
            text += "# HELP "
            text += family.name
            text += " "
            text += escapeHelp(family.help)
            text += "\n# TYPE "
            text += family.name
            text += " "
            text += family.type
            text += "\n"
            for sample in family.samples {
                text += sample
                text += "\n"
            }
        }
        return text
    }

    /// The text for a `stats` result alone (an older daemon without `metrics`): its counters.
    public static func render(counters stats: JSONValue, prefix: String = "imgd") -> String {
        render(.object(["counters": stats]), prefix: prefix)
    }

    // MARK: Families

    private struct Family {
        let name: String
        let help: String
        let type: String
        var samples: [String]
    }

    private enum Kind {
        case counter, gauge
    }

    private static func collect(_ value: JSONValue, path: [String], kind: Kind, prefix: String, into families: inout [Family]) {
        let joined = path.map(sanitize).joined(separator: "_")
        switch value {
        case .object(let members):
            if let label = (kind == .counter ? counterLabels : gaugeLabels)[joined] {
                let name = metricName(path, kind: kind, prefix: prefix)
                var samples: [String] = []
                for key in members.keys.sorted() {
                    guard let number = members[key].flatMap(Self.number) else { continue }
                    samples.append("\(name){\(label)=\"\(escapeLabel(key))\"} \(number)")
                }
                families.append(Family(name: name, help: help(joined, kind: kind), type: typeName(kind), samples: samples))
                return
            }
            for key in members.keys.sorted() {
                collect(members[key]!, path: path + [key], kind: kind, prefix: prefix, into: &families)
            }
        case .int, .double:
            guard !path.isEmpty, let number = Self.number(value) else { return }
            let name = metricName(path, kind: kind, prefix: prefix)
            families.append(Family(name: name, help: help(joined, kind: kind), type: typeName(kind), samples: ["\(name) \(number)"]))
        case .null, .bool, .string, .array:
            return
        }
    }

    private static func help(_ path: String, kind: Kind) -> String {
        switch kind {
        case .counter: counterHelp[path] ?? "imgd's \(path) counter (from stats)."
        case .gauge: gaugeHelp[path] ?? "imgd's \(path) gauge (from metrics)."
        }
    }

    private static func typeName(_ kind: Kind) -> String {
        kind == .counter ? "counter" : "gauge"
    }

    /// `imgd_<path joined by _>`, with `_total` for a counter.
    private static func metricName(_ path: [String], kind: Kind, prefix: String) -> String {
        let base = ([prefix] + path.map(sanitize)).joined(separator: "_")
        guard kind == .counter else { return base }
        return base.hasSuffix("_total") ? base : base + "_total"
    }

    private static func histogramFamily(_ key: String, _ value: JSONValue, prefix: String) -> Family? {
        guard case .array(let boundValues)? = value["bounds"], case .array(let series)? = value["series"] else { return nil }
        let bounds = boundValues.compactMap(\.doubleValue)
        let name = prefix + "_" + sanitize(key)
        var rendered: [(labels: String, lines: [String])] = []
        for entry in series {
            guard case .array(let countValues)? = entry["counts"], countValues.count == bounds.count + 1 else { continue }
            let counts = countValues.map { $0.intValue ?? 0 }
            var labels = ""
            if case .object(let members)? = entry["labels"] {
                labels = members.keys.sorted().map { "\(sanitize($0))=\"\(escapeLabel(members[$0]?.stringValue ?? ""))\"" }
                    .joined(separator: ",")
            }
            let separator = labels.isEmpty ? "" : ","
            var lines: [String] = []
            var cumulative = 0
            for (index, count) in counts.enumerated() {
                cumulative += count
                let le = index < bounds.count ? formatBound(bounds[index]) : "+Inf"
                lines.append("\(name)_bucket{\(labels)\(separator)le=\"\(le)\"} \(cumulative)")
            }
            let braces = labels.isEmpty ? "" : "{\(labels)}"
            lines.append("\(name)_sum\(braces) \(entry["sum"].flatMap(Self.number) ?? "0")")
            // The +Inf bucket's count, so the two always agree.
            lines.append("\(name)_count\(braces) \(cumulative)")
            rendered.append((labels, lines))
        }
        rendered.sort { $0.labels < $1.labels }
        let help = histogramHelp[key] ?? "imgd's \(key) histogram (from metrics)."
        return Family(name: name, help: help, type: "histogram", samples: rendered.flatMap(\.lines))
    }

    private static func infoFamily(_ key: String, _ value: JSONValue, prefix: String) -> Family? {
        let texts: [String]
        switch value {
        case .string(let text): texts = [text]
        case .array(let elements): texts = elements.compactMap(\.stringValue)
        default: return nil
        }
        let known = infoMetrics[key]
        let name = prefix + "_" + (known?.name ?? sanitize(key) + "_info")
        let label = known?.label ?? sanitize(key)
        let help = known?.help ?? "imgd's \(key) (from metrics); always 1."
        return Family(name: name, help: help, type: "gauge", samples: texts.sorted().map { "\(name){\(label)=\"\(escapeLabel($0))\"} 1" })
    }

    // MARK: Text

    /// A name part that Prometheus accepts: `[a-zA-Z0-9_]`, anything else becomes `_`. (Byte by
    /// byte, and the part itself when it needs nothing: a scrape sanitizes every name it writes.)
    public static func sanitize(_ part: String) -> String {
        func allowed(_ byte: UInt8) -> Bool {
            (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x30 && byte <= 0x39) || byte == 0x5f
        }
        if part.utf8.allSatisfy(allowed) { return part }
        return String(part.unicodeScalars.map { scalar in scalar.isASCII && allowed(UInt8(scalar.value)) ? Character(scalar) : "_" })
    }

    /// A sample value: integers as written, fractions in Swift's shortest round-trip form.
    public static func number(_ value: JSONValue) -> String? {
        switch value {
        case .int(let number): return String(number)
        case .double(let number): return format(number)
        default: return nil
        }
    }

    private static func format(_ number: Double) -> String {
        if number.isNaN { return "NaN" }
        if number.isInfinite { return number > 0 ? "+Inf" : "-Inf" }
        return String(number)
    }

    /// A bucket bound as clients write it: `1`, not `1.0`.
    private static func formatBound(_ bound: Double) -> String {
        if bound == bound.rounded(), abs(bound) < 1e15 { return String(Int(bound)) }
        return format(bound)
    }

    /// Label values escape backslash, double quote and newline.
    public static func escapeLabel(_ text: String) -> String {
        escaping(text, quotes: true)
    }

    /// HELP texts escape backslash and newline.
    public static func escapeHelp(_ text: String) -> String {
        escaping(text, quotes: false)
    }

    /// `text` with `\`, a newline and (with `quotes`) `"` escaped; the text itself when it has
    /// none of them (nearly always: a scrape escapes every label and help text it writes).
    private static func escaping(_ text: String, quotes: Bool) -> String {
        let needs = text.utf8.contains { $0 == 0x5c || $0 == 0x0a || (quotes && $0 == 0x22) }
        guard needs else { return text }
        // By scalar, not by Character: "\r\n" is one Character, and its "\n" must be escaped.
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out.append(contentsOf: "\\\\".unicodeScalars)
            case "\n": out.append(contentsOf: "\\n".unicodeScalars)
            case "\"" where quotes: out.append(contentsOf: "\\\"".unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}
