/// A cursor over a TOML document's bytes: the document's lines (key/value pairs, `[table]`
/// and `[[array]]` headers, comments), keys, arrays and inline tables. Strings are read in
/// `TOMLParser+Strings.swift`, numbers, booleans and date-times in `TOMLParser+Scalars.swift`.
struct TOMLParser {
    let text: [UInt8]
    var position = 0
    /// Offsets of the line feeds, for the line of any position (errors are rare, keys are few).
    private let lineFeeds: [Int]
    /// How deep the current value is inside arrays and inline tables.
    private var depth = 0
    /// The dotted key of the value being read (the table header's path, then the keys down to
    /// it), for errors: what a caller needs to keep a secret table's text out of a message.
    private var keyPath: [String] = []

    init(_ text: [UInt8]) {
        self.text = text
        lineFeeds = text.indices.filter { text[$0] == 0x0A }
        // A byte order mark says nothing in UTF-8; editors on some systems write one.
        if text.starts(with: [0xEF, 0xBB, 0xBF]) { position = 3 }
    }

    var current: UInt8? { position < text.count ? text[position] : nil }

    func peek(_ offset: Int) -> UInt8? { position + offset < text.count ? text[position + offset] : nil }

    /// The 1-based line of `offset`.
    func line(at offset: Int) -> Int {
        var low = 0
        var high = lineFeeds.count
        while low < high {
            let middle = (low + high) / 2
            if lineFeeds[middle] < offset { low = middle + 1 } else { high = middle }
        }
        return low + 1
    }

    /// An error at `offset` (the current position by default). A `reason` that quotes the
    /// document's text comes with `withoutText`, the same said without it.
    func fail(_ reason: String, at offset: Int? = nil, withoutText: String? = nil) -> TOMLError {
        TOMLError(line: line(at: offset ?? position), reason: reason, reasonWithoutText: withoutText, key: keyPath)
    }

    // MARK: - The document

    mutating func parseDocument() throws(TOMLError) -> TOMLTable {
        let root = TOMLTableNode(origin: .header, line: 1)
        var table = root
        while true {
            skipSpaces()
            guard let byte = current else { break }
            switch byte {
            case UInt8(ascii: "#"), 0x0A, 0x0D:
                break
            case UInt8(ascii: "["):
                let start = position
                let isArray = peek(1) == UInt8(ascii: "[")
                position += isArray ? 2 : 1
                skipSpaces()
                let path = try readKey()
                guard current == UInt8(ascii: "]") else { throw fail("expected ] to close the header") }
                position += 1
                if isArray {
                    guard current == UInt8(ascii: "]") else { throw fail("expected ]] to close the [[array]] header") }
                    position += 1
                    table = try root.appendTable(path, line: line(at: start))
                } else {
                    table = try root.defineTable(path, line: line(at: start))
                }
                keyPath = path
            default:
                try readKeyValue(into: table)
            }
            try finishLine()
        }
        return root.freeze()
    }

    /// After a key/value pair or a header: spaces, a comment, then the line's end (or the
    /// document's).
    private mutating func finishLine() throws(TOMLError) {
        skipSpaces()
        try skipComment()
        switch current {
        case nil: return
        case 0x0A: position += 1
        case 0x0D:
            guard peek(1) == 0x0A else { throw fail("a carriage return must be followed by a line feed") }
            position += 2
        default:
            throw fail("unexpected text after the value (one key = value per line)")
        }
    }

    mutating func skipSpaces() {
        while current == 0x20 || current == 0x09 { position += 1 }
    }

    /// A `#` comment up to the line's end, which is left for the caller. Control characters
    /// other than tab are refused, as in strings.
    private mutating func skipComment() throws(TOMLError) {
        guard current == UInt8(ascii: "#") else { return }
        position += 1
        while let byte = current, byte != 0x0A {
            if byte == 0x0D, peek(1) == 0x0A { return }
            guard !Self.isControl(byte) else { throw fail("a control character (\(Self.hex(byte))) in a comment") }
            position += 1
        }
    }

    /// Spaces, comments and line ends (between array elements).
    private mutating func skipBlank() throws(TOMLError) {
        while true {
            skipSpaces()
            try skipComment()
            switch current {
            case 0x0A: position += 1
            case 0x0D:
                guard peek(1) == 0x0A else { throw fail("a carriage return must be followed by a line feed") }
                position += 2
            default: return
            }
        }
    }

    /// Control characters TOML refuses in comments and strings: U+0000–U+0008, U+000A–U+001F,
    /// U+007F (tab is allowed; line ends are handled by the caller).
    static func isControl(_ byte: UInt8) -> Bool {
        (byte < 0x20 && byte != 0x09) || byte == 0x7F
    }

    static func hex(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: 4 - digits.count) + digits
    }

    // MARK: - Keys

    /// A key, dotted or not (`a`, `"quoted key"`, `a . 'b'.c`), and the spaces after it.
    mutating func readKey() throws(TOMLError) -> [String] {
        var path: [String] = []
        while true {
            skipSpaces()
            path.append(try readSimpleKey())
            guard path.count <= TOMLDocument.maximumDepth else {
                throw fail("a key of more than \(TOMLDocument.maximumDepth) dotted parts")
            }
            skipSpaces()
            guard current == UInt8(ascii: ".") else { return path }
            position += 1
        }
    }

    private mutating func readSimpleKey() throws(TOMLError) -> String {
        switch current {
        case UInt8(ascii: "\""):
            guard !(peek(1) == UInt8(ascii: "\"") && peek(2) == UInt8(ascii: "\"")) else {
                throw fail("a key cannot be a multi-line string")
            }
            return try readBasicString()
        case UInt8(ascii: "'"):
            guard !(peek(1) == UInt8(ascii: "'") && peek(2) == UInt8(ascii: "'")) else {
                throw fail("a key cannot be a multi-line string")
            }
            return try readLiteralString()
        default:
            let start = position
            while let byte = current, Self.isBareKeyByte(byte) { position += 1 }
            guard position > start else {
                switch current {
                case nil, 0x0A, 0x0D: throw fail("expected a key")
                case UInt8(ascii: "="): throw fail("a key is missing before =")
                default: throw fail("expected a key (bare keys are A-Z a-z 0-9 _ -; others need quotes)")
                }
            }
            return String(decoding: text[start..<position], as: UTF8.self)
        }
    }

    static func isBareKeyByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    // MARK: - Values

    mutating func readValue() throws(TOMLError) -> TOMLValue {
        switch current {
        case UInt8(ascii: "\""):
            if peek(1) == UInt8(ascii: "\""), peek(2) == UInt8(ascii: "\"") { return .string(try readMultilineBasicString()) }
            return .string(try readBasicString())
        case UInt8(ascii: "'"):
            if peek(1) == UInt8(ascii: "'"), peek(2) == UInt8(ascii: "'") { return .string(try readMultilineLiteralString()) }
            return .string(try readLiteralString())
        case UInt8(ascii: "["):
            return try nested { (parser: inout TOMLParser) throws(TOMLError) in try parser.readArray() }
        case UInt8(ascii: "{"):
            return try nested { (parser: inout TOMLParser) throws(TOMLError) in try parser.readInlineTable() }
        case nil, 0x0A, 0x0D, UInt8(ascii: "#"):
            throw fail("a value is missing")
        default:
            return try readScalar()
        }
    }

    /// Runs `body` one level deeper, refusing past ``TOMLDocument/maximumDepth``.
    private mutating func nested(
        _ body: (inout TOMLParser) throws(TOMLError) -> TOMLValue
    ) throws(TOMLError) -> TOMLValue {
        guard depth < TOMLDocument.maximumDepth else {
            throw fail("arrays and inline tables nested deeper than \(TOMLDocument.maximumDepth) levels")
        }
        depth += 1
        defer { depth -= 1 }
        return try body(&self)
    }

    /// `[ value, value, ]`: over several lines if need be, comments between elements, a
    /// trailing comma allowed, types mixed.
    private mutating func readArray() throws(TOMLError) -> TOMLValue {
        position += 1
        var values: [TOMLValue] = []
        while true {
            try skipBlank()
            if current == UInt8(ascii: "]") {
                position += 1
                return .array(values)
            }
            guard current != UInt8(ascii: ",") else { throw fail("an array element is missing before ,") }
            guard current != nil else { throw fail("an array is not closed") }
            values.append(try readValue())
            try skipBlank()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"): continue
            case nil: throw fail("an array is not closed")
            default: throw fail("expected , or ] after an array element")
            }
        }
    }

    /// `key = value` (the key may be dotted), set in `table` with the key's line.
    private mutating func readKeyValue(into table: TOMLTableNode) throws(TOMLError) {
        let start = position
        let path = try readKey()
        guard current == UInt8(ascii: "=") else {
            // A line holding only a word (a token pasted alone) is read as a key: not quoted
            // where the document may hold secrets.
            throw fail("expected = after the key \(TOMLTableNode.show(path))", withoutText: "expected = after a key")
        }
        position += 1
        skipSpaces()
        let outer = keyPath
        keyPath = outer + path
        defer { keyPath = outer }
        let value = try readValue()
        try table.setValue(value, at: path, line: line(at: start))
    }

    /// `{ key = value, a.b = value }` on one line, no trailing comma; complete once closed.
    private mutating func readInlineTable() throws(TOMLError) -> TOMLValue {
        position += 1
        let table = TOMLTableNode(origin: .header, line: line(at: position))
        skipSpaces()
        if current == UInt8(ascii: "}") {
            position += 1
            return .table(table.freeze())
        }
        while true {
            skipSpaces()
            if current == 0x0A || current == 0x0D { throw fail("an inline table must be closed on the line it starts") }
            try readKeyValue(into: table)
            skipSpaces()
            switch current {
            case UInt8(ascii: ","):
                position += 1
                skipSpaces()
                if current == UInt8(ascii: "}") { throw fail("an inline table takes no comma after its last key") }
            case UInt8(ascii: "}"):
                position += 1
                return .table(table.freeze())
            case nil, 0x0A, 0x0D:
                throw fail("an inline table must be closed on the line it starts")
            default:
                throw fail("expected , or } in an inline table")
            }
        }
    }
}
