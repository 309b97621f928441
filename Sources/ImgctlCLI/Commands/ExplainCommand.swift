import ArgumentParser
import ImgdBase
import ImgdProtocol

/// `imgctl explain URL [--key K]`: why a URL is or is not cached, section by section, from the
/// daemon's one `explain` reply (`--json` prints the reply itself).
struct ExplainCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Explain why URL is or is not cached: its key, entry, failure, download, host, address, tier and last outcomes.",
        discussion: """
            Asks nothing of the network and changes nothing: the entry's access time, the memory \
            tier's order and the queue are left as they are. --key names a chosen key, always in \
            your own namespace (as get and add use it).
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp("A chosen key (in your own namespace) instead of the URL's key.", valueName: "key"))
    var key: String?

    @Argument(help: ArgumentHelp("The image URL.", valueName: "url"))
    var url: String

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        var arguments: [String: JSONValue] = ["url": .string(url)]
        if let key { arguments["key"] = .string(key) }
        let result = try session.call("explain", arguments)
        if session.json { return }
        for line in Self.lines(result, now: WallClock.systemMilliseconds()) { session.output(line) }
    }

    /// The human sections of an `explain` result, instants relative to `now` (ms since the epoch).
    static func lines(_ result: JSONValue, now: Int) -> [String] {
        var lines: [String] = []
        func text(_ value: JSONValue?) -> String { HumanFormat.text(value?.stringValue ?? "?") }
        func when(_ value: JSONValue?) -> String {
            guard let ms = value?.intValue else { return "-" }
            let delta = Double(ms - now) / 1000
            return delta >= 0 ? "in " + HumanFormat.duration(seconds: delta.rounded(.down)) : HumanFormat.duration(seconds: (-delta).rounded(.down)) + " ago"
        }
        lines.append("url: \(text(result["url"]))")
        if let key = result["key"] {
            if key["from"]?.stringValue == "chosen" {
                lines.append("key: \(text(key["key"])) (chosen key \(text(key["chosen"])), namespace \(text(key["namespace"])))")
            } else {
                lines.append("key: \(text(key["key"])) (from the URL)")
                if let rule = key["host_rule"]?.stringValue {
                    let ignored = (key["ignored"]?.arrayValue ?? []).compactMap(\.stringValue).map(HumanFormat.text)
                    let patterns = (key["ignore_query"]?.arrayValue ?? []).compactMap(\.stringValue).map(HumanFormat.text)
                    lines.append("  host table \(HumanFormat.text(rule)): key-ignore-query \(patterns.isEmpty ? "-" : patterns.joined(separator: ", "))")
                    lines.append("  left out of the key: \(ignored.isEmpty ? "nothing" : ignored.joined(separator: ", "))")
                    lines.append("  keyed URL: \(text(key["keyed_url"]))")
                }
            }
        }
        if let entry = result["entry"], entry != .null {
            var parts = ["\(HumanFormat.size(entry["bytes"]?.intValue ?? 0)) \(text(entry["format"]))"]
            if let width = entry["width"]?.intValue, let height = entry["height"]?.intValue { parts.append("\(width)×\(height)") }
            parts.append("sha256 \(text(entry["sha256"]))")
            lines.append("cached: " + parts.joined(separator: ", "))
            lines.append("  fetched \(when(entry["fetched_at"])), last used \(when(entry["last_access"])), \(HumanFormat.count(entry["hit_count"]?.intValue ?? 0)) hits")
            if entry["pinned"]?.boolValue == true { lines.append("  pinned until \(when(entry["pinned_until"]))") }
            if entry["due"]?.boolValue == true {
                lines.append("  due for revalidation (refresh \(text(entry["refresh"]))): the next use queues it")
            } else if entry["due_at"]?.intValue != nil {
                lines.append("  fresh; due for revalidation \(when(entry["due_at"])) (refresh \(text(entry["refresh"])))")
            } else {
                lines.append("  fresh; never due (refresh \(text(entry["refresh"])))")
            }
        } else {
            lines.append("cached: no")
        }
        lines.append("memory tier: \(result["memory"]?.boolValue == true ? "yes" : "no")")
        if let failure = result["failure"], failure != .null {
            lines.append("failed: \(text(failure["code"])): \(text(failure["message"]))")
            lines.append("  remembered until \(when(failure["until"])): asking again before then is answered with this failure (imgctl retry URL forgets it)")
        } else {
            lines.append("failed: no remembered failure")
        }
        let host = result["host"]
        let hostLine = "\(text(host?["host"])): \(host?["running"]?.intValue ?? 0) of \(host?["cap"]?.intValue ?? 0) slots, \(HumanFormat.count(host?["queued"]?.intValue ?? 0)) queued"
        if let download = result["download"], download != .null {
            let state = download["state"]?.stringValue ?? "?"
            var line = "download: \(HumanFormat.text(state)) (\(text(download["priority"]))"
            if download["revalidation"]?.boolValue == true { line += ", revalidation" }
            line += ", attempt \(download["attempts"]?.intValue ?? 0))"
            lines.append(line)
            switch state {
            case "queued":
                if let hop = download["pending_hop_host"]?.stringValue {
                    lines.append("  a redirect waits for \(HumanFormat.text(hop))")
                }
                lines.append("  behind \(hostLine)")
            case "running":
                var detail = "  \(HumanFormat.size(download["bytes_received"]?.intValue ?? 0))"
                if let declared = download["declared_bytes"]?.intValue { detail += " of \(HumanFormat.size(declared))" }
                detail += " via \(text(download["via"])), started \(when(download["running_since"]))"
                lines.append(detail)
                if download["throttled"]?.boolValue == true { lines.append("  paused by max-rate") }
                if download["waiting_for_room"]?.boolValue == true { lines.append("  paused: waiting for room in the cache") }
            case "waiting_retry":
                lines.append("  next attempt \(when(download["retry_at"]))")
            default:
                break
            }
        } else {
            lines.append("download: none under way")
        }
        var hostParts = [hostLine]
        if let rule = host?["rule"]?.stringValue { hostParts.append("host table \(HumanFormat.text(rule))") }
        if let rate = host?["rate_interval_ms"]?.intValue { hostParts.append("one request every \(HumanFormat.duration(seconds: Double(rate) / 1000))") }
        lines.append("host: " + hostParts.joined(separator: ", "))
        if host?["held_until"]?.intValue != nil {
            let cause = host?["held_by"]?.stringValue == "retry_after" ? "a Retry-After" : "its rate"
            lines.append("  held by \(cause) until \(when(host?["held_until"]))")
        }
        if let queue = result["queue"] {
            lines.append("queue: \(HumanFormat.count(queue["queued"]?.intValue ?? 0)) queued, \(queue["running"]?.intValue ?? 0) of \(queue["max_parallel"]?.intValue ?? 0) running")
        }
        switch result["address"]?["verdict"]?.stringValue {
        case "refused": lines.append("address: refused: \(text(result["address"]?["reason"]))")
        case "allowed": lines.append("address: allowed")
        default: lines.append("address: a name: each address is checked when a connection is made")
        }
        if let tier = result["tier"], tier != .null {
            lines.append("tier: through \(text(tier["url"]))")
        } else if let reason = result["tier_bypass"]?.stringValue {
            let why = reason == "host_headers" ? "the host's requests carry configured headers" : "the URL has user info"
            lines.append("tier: not used: \(why)")
        } else {
            lines.append("tier: none configured")
        }
        let outcomes = result["outcomes"]?.arrayValue ?? []
        lines.append(outcomes.isEmpty ? "last outcomes: none recorded" : "last outcomes (oldest first):")
        for outcome in outcomes {
            var line = "  \(when(outcome["at"])): \(text(outcome["kind"]))"
            if let code = outcome["code"]?.stringValue { line += " \(HumanFormat.text(code))" }
            if let bytes = outcome["bytes"]?.intValue { line += ", \(HumanFormat.size(bytes))" }
            line += ", \(text(outcome["cause"])), via \(text(outcome["via"])), \(outcome["attempts"]?.intValue ?? 0) attempts, took \(HumanFormat.duration(seconds: Double(outcome["took_ms"]?.intValue ?? 0) / 1000))"
            lines.append(line)
        }
        return lines
    }
}
