import ImgdCore

/// The URLs of an `add` that says when they must be ready (`ready_by`): made a list like one
/// dropped in the spool, so that it has what a deadline needs — an estimate in `lists`, the
/// `at_risk` / `on_track` events, a report — and is kept across a restart.
public struct AddedList: Sendable {
    /// Its name as `lists` shows it (`.json` added when it has no such ending).
    public let name: String
    /// The uid of the peer that added it: its owner, who may cancel it, and in whose namespace
    /// its items' chosen keys are.
    public let owner: UInt32
    /// Each item as given (its text, for the list's file and the report) and what it parsed to:
    /// a URL with its options, or why it is not one.
    public let items: [(text: String, item: Item)]
    /// The list's file: the `add`'s `urls` with its deadline, as a JSON list's object.
    public let file: [UInt8]
    public let readyBy: Int
    public let pinMilliseconds: Int?
    public let refresh: RefreshRule?
    /// For an owner that is not privileged, its share of `max-queued`: the URLs pending in its
    /// unfinished lists, this one's included, may not pass it. Nil: no bound.
    public let ownerShare: Int?

    public init(
        name: String, owner: UInt32, items: [(text: String, item: Item)],
        file: [UInt8], readyBy: Int, pinMilliseconds: Int?, refresh: RefreshRule?, ownerShare: Int?
    ) {
        self.name = name
        self.owner = owner
        self.items = items
        self.file = file
        self.readyBy = readyBy
        self.pinMilliseconds = pinMilliseconds
        self.refresh = refresh
        self.ownerShare = ownerShare
    }

    /// One item of the `add`.
    public enum Item: Sendable {
        /// A URL with its options.
        case url(ImageURL, LinkListItemOptions)
        /// Not a URL (or a bad option), and why: a `bad_url` line of the list.
        case bad(String)
    }

    /// Why `name` (with its `.json`) cannot name a list, or nil: it becomes a file name in
    /// `done/` or `failed/`, beside reports.
    public static func problem(withName name: String) -> String? {
        if name.utf8.count > 128 { return "is longer than 128 bytes" }
        let base = name.hasSuffix(".json") ? name.dropLast(5) : Substring(name)
        if base.allSatisfy({ $0 == " " || $0 == "\t" }) { return "is empty or only spaces" }
        if name.hasPrefix(".") { return "starts with '.' (hidden names are ignored in the spool)" }
        if name.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0 == "/" }) {
            return "holds '/' or a control character"
        }
        if name.hasSuffix(ListReportWriter.suffix) { return "ends in \(ListReportWriter.suffix), which is kept for reports" }
        return nil
    }
}
