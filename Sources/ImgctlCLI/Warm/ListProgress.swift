import ImgdProtocol

/// What `warm --wait` knows of one submitted link list.
struct ListProgress: Equatable {
    /// The list's name in the spool.
    var name: String
    /// `claimed`, `active`, `done`, `failed`, `cancelled`; nil until the daemon reports it.
    var state: String?
    var total: Int?
    var cached = 0
    var alreadyCached = 0
    var failed = 0
    var pending: Int?
    var bytes: Int?
    /// The list's entry from `lists` (or its report, or its `list_done` event), as received,
    /// for `--json`.
    var raw: JSONValue = .null

    /// The states a list ends in.
    static let finalStates: Set<String> = ["done", "failed", "cancelled"]

    var isFinished: Bool { state.map(Self.finalStates.contains) ?? false }

    /// Whether the list ended badly: `failed`, or `cancelled` (reported like a failed one).
    var endedBadly: Bool { state == "failed" || state == "cancelled" }

    /// URLs settled so far.
    var settled: Int { cached + alreadyCached + failed }

    /// Takes the counts from a `lists` entry, a report, or a `list_done` event's data; fields
    /// it lacks keep their value.
    mutating func update(from entry: JSONValue) {
        if let value = entry["state"]?.stringValue { state = value }
        if let value = entry["total"]?.intValue { total = value }
        if let value = entry["cached"]?.intValue { cached = value }
        if let value = entry["already_cached"]?.intValue { alreadyCached = value }
        if let value = entry["failed"]?.intValue { failed = value }
        if let value = entry["pending"]?.intValue { pending = value }
        if let value = entry["bytes"]?.intValue { bytes = value }
        raw = entry
    }
}
