/// A TOML 1.0 document (https://toml.io/en/v1.0.0), parsed strictly: every valid document is
/// read, every invalid one is refused with the line to look at.
///
/// Every key keeps the line that defined it (``TOMLTable/Entry/line``), so whoever reads the
/// settings can name `FILE:LINE` for a key it does not know or a value it cannot use.
///
/// Limits: the text is what the caller read (imgd reads at most 1 MiB); arrays and inline
/// tables nest at most ``maximumDepth`` deep, and a key has at most that many dotted parts, so
/// a hostile file cannot exhaust the stack.
public struct TOMLDocument: Sendable, Equatable {
    /// The top-level table.
    public let root: TOMLTable

    /// How deep arrays and inline tables may nest, and how many parts a dotted key may have (64).
    public static let maximumDepth = 64

    /// Parses `text`.
    public init(parsing text: String) throws(TOMLError) {
        var parser = TOMLParser(Array(text.utf8))
        root = try parser.parseDocument()
    }
}

/// Why a TOML document is invalid, with the line to look at.
///
/// ``reason`` may quote the document (a word that is not a value, a bad escape);
/// ``reasonWithoutText`` says the same without any of its text, for a file or a table that may
/// hold secrets (a `headers-file`, a `headers` table), where the word quoted could be a token.
public struct TOMLError: Error, Sendable, Equatable, CustomStringConvertible {
    public let line: Int
    public let reason: String
    /// ``reason`` without any text of the document (the key included).
    public let reasonWithoutText: String
    /// The dotted key (table headers included) whose value was being read when the error was
    /// found; empty outside a value.
    public let key: [String]

    public init(line: Int, reason: String, reasonWithoutText: String? = nil, key: [String] = []) {
        self.line = line
        self.reason = reason
        self.reasonWithoutText = reasonWithoutText ?? reason
        self.key = key
    }

    public var description: String { "line \(line): \(reason)" }

    /// ``key`` as a header writes it (`host."images.example.com".headers`): names the key in a
    /// message that must not quote the value.
    public var keyText: String { TOMLTableNode.show(key) }
}
