import ArgumentParser
import ImgdProtocol

/// `imgctl status`: what the daemon is doing and how full its tiers are.
struct StatusCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the daemon's version, queue, cache and memory tier, and any degraded state.")

    @OptionGroup var connection: ConnectionOptions

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        let result = try session.call("status")
        if session.json { return }
        for line in Self.lines(result) { session.output(line) }
    }

    /// `key: value` lines for a `status` result; fields it lacks are left out.
    static func lines(_ status: JSONValue) -> [String] {
        var lines: [String] = []
        var header = "imgd"
        if let version = status["version"]?.stringValue { header += " " + HumanFormat.text(version) }
        if let pid = status["pid"]?.intValue { header += " (pid \(pid))" }
        if let uptime = status["uptime_s"]?.doubleValue { header += ", up " + HumanFormat.duration(seconds: uptime) }
        lines.append(header)
        for (key, label) in [("queued", "queued"), ("in_flight", "in flight"), ("lists_active", "lists active"), ("lists_waiting", "lists waiting")] {
            if let value = status[key]?.intValue { lines.append("\(label): \(HumanFormat.count(value))") }
        }
        // What max-queued and max-queued-bytes bound.
        if let held = status["held"]?.intValue {
            let bytes = status["held_bytes"]?.intValue.map { " (\(HumanFormat.size($0)) of URLs)" } ?? ""
            lines.append("requests held: \(HumanFormat.count(held))\(bytes)")
        }
        if let cache = status["cache"] {
            let pinned = cache["pinned_bytes"]?.intValue.map { "\(HumanFormat.size($0)) pinned" }
            lines.append("disk cache: " + tier(cache, extra: pinned))
        }
        if let path = status["cache"]?["path"]?.stringValue {
            lines.append("cache folder: \(HumanFormat.text(path))")
        }
        if let memory = status["memory"] {
            lines.append("memory tier: " + tier(memory, extra: nil))
        }
        // "psi-poll (/proc/pressure/memory)": the source in use, after any fallback.
        if let source = status["memory"]?["pressure_source"]?.stringValue {
            let path = status["memory"]?["pressure_path"]?.stringValue.map { " (\(HumanFormat.text($0)))" } ?? ""
            lines.append("memory pressure: \(HumanFormat.text(source))\(path)")
        }
        if let events = status["pressure_events"]?.intValue {
            lines.append("memory pressure events: \(HumanFormat.count(events))")
        }
        if let spool = status["spool"]?.stringValue {
            lines.append("spool: \(HumanFormat.text(spool))")
        }
        let degraded = status["degraded"]?.arrayValue ?? []
        if degraded.isEmpty {
            lines.append("degraded: no")
        } else {
            for entry in degraded {
                lines.append("degraded: \(HumanFormat.text(entry["code"]?.stringValue ?? "?")): \(HumanFormat.text(entry["message"]?.stringValue ?? ""))")
            }
        }
        if let ready = status["ready"] { lines.append(Self.readiness(ready)) }
        if let window = status["window"] { lines.append(Self.window(window)) }
        if let reason = status["courtesy"]?["reason"]?.stringValue { lines.append("courtesy: \(HumanFormat.text(reason))") }
        return lines
    }

    /// "window: night, closes in 3h 10m (max-parallel 32)", "window: none (max-parallel 8); night opens in 5h".
    static func window(_ window: JSONValue) -> String {
        let caps = "max-parallel \(window["max_parallel"]?.intValue ?? 0)"
            + (window["max_rate"]?.intValue.map { ", max-rate \(HumanFormat.size($0))/s" } ?? "")
        if let name = window["name"]?.stringValue {
            let until = window["current"]?["closes_at"]?.intValue.map { ", closes " + HumanFormat.fromNow(milliseconds: $0) } ?? ""
            return "window: \(HumanFormat.text(name))\(until) (\(caps))"
        }
        guard let next = window["next"], let name = next["name"]?.stringValue, let opens = next["opens_at"]?.intValue else {
            return "window: none (\(caps))"
        }
        return "window: none (\(caps)); \(HumanFormat.text(name)) opens \(HumanFormat.fromNow(milliseconds: opens))"
    }

    /// "ready: yes (20 of 20 URLs cached)", "ready: no: /etc/imgd/hot.txt: no such file".
    static func readiness(_ ready: JSONValue) -> String {
        let cached = ready["cached"]?.intValue ?? 0, total = ready["total"]?.intValue ?? 0
        let counts = (ready["lists"]?.arrayValue ?? []).isEmpty
            ? "no ready-lists" : "\(HumanFormat.count(cached)) of \(HumanFormat.count(total)) URLs cached"
        guard ready["ready"]?.boolValue == true else {
            let missing = (ready["missing"]?.arrayValue ?? []).compactMap(\.stringValue).map(HumanFormat.text)
            return "ready: no: " + (missing.isEmpty ? counts : missing.joined(separator: "; "))
        }
        return "ready: yes (\(counts))"
    }

    /// "1.2 GiB in 3,400 entries, limit 10 GiB, 12 MiB pinned".
    private static func tier(_ tier: JSONValue, extra: String?) -> String {
        var parts: [String] = []
        let bytes = tier["bytes"]?.intValue.map(HumanFormat.size) ?? "?"
        let entries =
            tier["entries"]?.intValue.map { "\(HumanFormat.count($0)) " + ($0 == 1 ? "entry" : "entries") } ?? "? entries"
        parts.append("\(bytes) in \(entries)")
        if let limit = tier["limit"]?.intValue { parts.append("limit \(HumanFormat.size(limit))") }
        if let extra { parts.append(extra) }
        return parts.joined(separator: ", ")
    }
}
