/// A value in imgd's configuration file.
public enum TOMLValue: Sendable, Equatable, CustomStringConvertible {
    case string(String)
    case integer(Int)
    case float(Double)
    case boolean(Bool)
    case array([TOMLValue])

    public var description: String {
        switch self {
        case .string(let text): "\"\(text)\""
        case .integer(let value): "\(value)"
        case .float(let value): "\(value)"
        case .boolean(let value): "\(value)"
        case .array(let values): "[" + values.map(\.description).joined(separator: ", ") + "]"
        }
    }
}

/// The subset of TOML imgd's configuration file uses: `key = value` lines at the top level,
/// `#` comments, and values that are strings (basic `"…"` with escapes, or literal `'…'`),
/// integers (with `_` separators), floats, booleans, and arrays of those (over several lines if
/// need be).
///
/// Tables (`[name]`), dotted keys and dates are refused with an error naming the line, rather
/// than half-understood: every setting is a top-level key named like its flag.
public struct TOMLDocument: Sendable, Equatable {
    /// Keys in file order, with the line each was set on.
    public private(set) var entries: [(key: String, value: TOMLValue, line: Int)] = []

    public static func == (lhs: TOMLDocument, rhs: TOMLDocument) -> Bool {
        lhs.entries.map(\.key) == rhs.entries.map(\.key) && lhs.entries.map(\.value) == rhs.entries.map(\.value)
    }

    /// Parses `text`.
    public init(parsing text: String) throws(TOMLError) {
        var parser = TOMLParser(Array(text.utf8))
        var seen: Set<String> = []
        while let (key, value, line) = try parser.nextEntry() {
            guard seen.insert(key).inserted else { throw TOMLError(line: line, reason: "\(key) is set twice") }
            entries.append((key, value, line))
        }
    }
}

/// Why a configuration file could not be read, with the line to look at.
public struct TOMLError: Error, Sendable, Equatable, CustomStringConvertible {
    public let line: Int
    public let reason: String

    public var description: String { "line \(line): \(reason)" }
}

/// A cursor over the file's bytes.
private struct TOMLParser {
    private let text: [UInt8]
    private var position = 0
    private var line = 1

    init(_ text: [UInt8]) {
        self.text = text
    }

    private var current: UInt8? { position < text.count ? text[position] : nil }

    private func fail(_ reason: String) -> TOMLError { TOMLError(line: line, reason: reason) }

    mutating func nextEntry() throws(TOMLError) -> (String, TOMLValue, Int)? {
        skipBlankLinesAndComments()
        guard let first = current else { return nil }
        if first == UInt8(ascii: "[") {
            throw fail("tables ([name]) are not used: set every key at the top level, named like its flag")
        }
        let line = self.line
        let key = try readKey()
        skipSpaces()
        guard current == UInt8(ascii: "=") else { throw fail("expected = after \(key)") }
        position += 1
        skipSpaces()
        let value = try readValue()
        skipSpaces()
        skipComment()
        if let next = current, next != 0x0A, next != 0x0D {
            throw fail("unexpected text after the value of \(key)")
        }
        return (key, value, line)
    }

    private mutating func readKey() throws(TOMLError) -> String {
        if current == UInt8(ascii: "\"") { return try readBasicString() }
        if current == UInt8(ascii: "'") { return try readLiteralString() }
        let start = position
        while let byte = current, Self.isBareKeyByte(byte) { position += 1 }
        guard position > start else { throw fail("expected a key") }
        if current == UInt8(ascii: ".") { throw fail("dotted keys are not used: set every key at the top level") }
        return String(decoding: text[start..<position], as: UTF8.self)
    }

    private static func isBareKeyByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    private mutating func readValue() throws(TOMLError) -> TOMLValue {
        switch current {
        case UInt8(ascii: "\""):
            return .string(try readBasicString())
        case UInt8(ascii: "'"):
            return .string(try readLiteralString())
        case UInt8(ascii: "["):
            return try readArray()
        case nil, 0x0A, 0x0D:
            throw fail("a value is missing")
        default:
            return try readScalar()
        }
    }

    private mutating func readArray() throws(TOMLError) -> TOMLValue {
        position += 1
        var values: [TOMLValue] = []
        while true {
            skipBlankLinesAndComments()
            if current == UInt8(ascii: "]") {
                position += 1
                return .array(values)
            }
            values.append(try readValue())
            skipBlankLinesAndComments()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"): continue
            default: throw fail("expected , or ] in an array")
            }
        }
    }

    private mutating func readScalar() throws(TOMLError) -> TOMLValue {
        let start = position
        while let byte = current, byte != 0x0A, byte != 0x0D, byte != UInt8(ascii: "#"), byte != UInt8(ascii: ","),
            byte != UInt8(ascii: "]"), byte != 0x20, byte != 0x09
        {
            position += 1
        }
        let word = String(decoding: text[start..<position], as: UTF8.self)
        switch word {
        case "true": return .boolean(true)
        case "false": return .boolean(false)
        default: break
        }
        let digits = word.replacingUnderscores()
        if let value = Int(digits) { return .integer(value) }
        if let value = Double(digits), value.isFinite { return .float(value) }
        throw fail("\(word) is not a value (strings need quotes: \"\(word)\")")
    }

    private mutating func readBasicString() throws(TOMLError) -> String {
        position += 1
        var bytes: [UInt8] = []
        while true {
            guard let byte = current, byte != 0x0A else { throw fail("a string is not closed") }
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: bytes, as: UTF8.self) else { throw fail("a string is not UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                guard let escaped = current else { throw fail("a string is not closed") }
                position += 1
                switch escaped {
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(escaped)
                case UInt8(ascii: "u"), UInt8(ascii: "U"):
                    let count = escaped == UInt8(ascii: "u") ? 4 : 8
                    guard position + count <= text.count,
                        let scalar = UInt32(String(decoding: text[position..<(position + count)], as: UTF8.self), radix: 16)
                            .flatMap(Unicode.Scalar.init)
                    else { throw fail("a \\u escape is not a Unicode scalar") }
                    position += count
                    bytes.append(contentsOf: Array(String(Character(scalar)).utf8))
                default:
                    throw fail("unknown escape \\\(Character(Unicode.Scalar(escaped)))")
                }
            default:
                bytes.append(byte)
            }
        }
    }

    private mutating func readLiteralString() throws(TOMLError) -> String {
        position += 1
        let start = position
        while let byte = current, byte != UInt8(ascii: "'") {
            guard byte != 0x0A else { throw fail("a string is not closed") }
            position += 1
        }
        guard current != nil else { throw fail("a string is not closed") }
        defer { position += 1 }
        guard let text = String(validating: text[start..<position], as: UTF8.self) else { throw fail("a string is not UTF-8") }
        return text
    }

    private mutating func skipSpaces() {
        while current == 0x20 || current == 0x09 { position += 1 }
    }

    private mutating func skipComment() {
        guard current == UInt8(ascii: "#") else { return }
        while let byte = current, byte != 0x0A { position += 1 }
    }

    /// Skips spaces, comments and line ends (between entries, and inside arrays).
    private mutating func skipBlankLinesAndComments() {
        while true {
            skipSpaces()
            skipComment()
            if current == 0x0D { position += 1 }
            guard current == 0x0A else { return }
            position += 1
            line += 1
        }
    }
}

extension String {
    fileprivate func replacingUnderscores() -> String {
        String(unicodeScalars.filter { $0 != "_" })
    }
}
