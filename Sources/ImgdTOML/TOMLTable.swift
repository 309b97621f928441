/// A TOML table: keys in the order they were defined, each with the line that defined it, so a
/// setting the reader does not know (or cannot use) can be reported as `FILE:LINE`.
///
/// The same type holds the document's root, `[table]`s, inline tables and the elements of
/// arrays of tables, so a reader walks nested settings (`[host."images.example.com"]` with
/// `headers = { Authorization = "…" }`) as it walks top-level ones.
public struct TOMLTable: Sendable, Equatable {
    /// One key of a table.
    public struct Entry: Sendable, Equatable {
        public let key: String
        public let value: TOMLValue
        /// The line that defined the key: its `key = value` line, or its `[table]` /
        /// `[[array]]` header (for a table made implicitly by a longer header, that header's).
        public let line: Int
    }

    /// The keys, in the order they were first defined.
    public private(set) var entries: [Entry]
    private var positions: [String: Int]

    init(entries: [Entry]) {
        self.entries = entries
        positions = Dictionary(uniqueKeysWithValues: entries.enumerated().map { ($0.element.key, $0.offset) })
    }

    /// The entry for `key`, if the table has it.
    public subscript(key: String) -> Entry? {
        positions[key].map { entries[$0] }
    }

    public var keys: [String] { entries.map(\.key) }

    public static func == (lhs: TOMLTable, rhs: TOMLTable) -> Bool {
        lhs.entries == rhs.entries
    }
}
