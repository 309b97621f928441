import NIOCore

/// Why a text is not JSON, and where (a byte offset from the start).
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public let reason: String
    public let offset: Int

    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSONValue {
    /// Nesting deeper than this (arrays and objects inside each other) is refused: 64 by default,
    /// far beyond any request, and it keeps the recursive parser's stack small.
    public static let defaultMaximumDepth = 64

    /// Parses one JSON value (RFC 8259, strictly: no comments, no trailing commas, no NaN),
    /// with whitespace around it. Strings must be valid UTF-8; numbers out of `Double`'s range
    /// are refused.
    public init(parsing text: String, maximumDepth: Int = JSONValue.defaultMaximumDepth) throws(JSONParseError) {
        var text = text
        let result = text.withUTF8 { bytes in
            JSONParser.parse(UnsafeRawBufferPointer(bytes), maximumDepth: maximumDepth)
        }
        self = try result.get()
    }

    /// Parses the readable bytes of `buffer` (see ``init(parsing:maximumDepth:)``).
    public init(parsing buffer: ByteBuffer, maximumDepth: Int = JSONValue.defaultMaximumDepth) throws(JSONParseError) {
        let result = buffer.withUnsafeReadableBytes { bytes in
            JSONParser.parse(bytes, maximumDepth: maximumDepth)
        }
        self = try result.get()
    }

    /// Parses `bytes`, a reply line or a file read whole (see ``init(parsing:maximumDepth:)``).
    public init(parsing bytes: some Collection<UInt8>, maximumDepth: Int = JSONValue.defaultMaximumDepth) throws(JSONParseError) {
        let contiguous = bytes.withContiguousStorageIfAvailable { bytes in
            JSONParser.parse(UnsafeRawBufferPointer(bytes), maximumDepth: maximumDepth)
        }
        let result = contiguous ?? Array(bytes).withUnsafeBytes { JSONParser.parse($0, maximumDepth: maximumDepth) }
        self = try result.get()
    }
}

/// A recursive-descent JSON parser over bytes that stay valid while it runs.
private struct JSONParser {
    let bytes: UnsafeRawBufferPointer
    let maximumDepth: Int
    var index = 0
    var depth = 0

    init(bytes: UnsafeRawBufferPointer, maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    /// Parses `bytes` as one JSON document.
    static func parse(_ bytes: UnsafeRawBufferPointer, maximumDepth: Int) -> Result<JSONValue, JSONParseError> {
        var parser = JSONParser(bytes: bytes, maximumDepth: maximumDepth)
        do throws(JSONParseError) {
            return .success(try parser.parseDocument())
        } catch {
            return .failure(error)
        }
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw failure("unexpected text after the value") }
        return value
    }

    private func failure(_ reason: String) -> JSONParseError {
        JSONParseError(reason: reason, offset: index)
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 {
            index += 1
        }
    }

    private mutating func expect(_ byte: UInt8, _ what: String) throws(JSONParseError) {
        guard current == byte else { throw failure("expected \(what)") }
        index += 1
    }

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard let byte = current else { throw failure("unexpected end of text") }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try parseLiteral("true", .bool(true))
        case UInt8(ascii: "f"): return try parseLiteral("false", .bool(false))
        case UInt8(ascii: "n"): return try parseLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw failure("unexpected character")
        }
    }

    private mutating func parseLiteral(_ word: StaticString, _ value: JSONValue) throws(JSONParseError) -> JSONValue {
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard bytes.count - index >= expected.count, bytes[index..<index + expected.count].elementsEqual(expected)
        else { throw failure("unexpected character") }
        index += expected.count
        return value
    }

    private mutating func enterContainer() throws(JSONParseError) {
        depth += 1
        guard depth <= maximumDepth else { throw failure("nested deeper than \(maximumDepth) levels") }
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enterContainer()
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                index += 1
                continue
            }
            try expect(UInt8(ascii: "]"), "',' or ']'")
            depth -= 1
            return .array(elements)
        }
    }

    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enterContainer()
        index += 1
        // Room for a request's members (id, cmd and a few arguments) from the start: grown
        // one member at a time, a dictionary is reallocated twice on the way to four.
        var members: [String: JSONValue] = [:]
        members.reserveCapacity(6)
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw failure("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            try expect(UInt8(ascii: ":"), "':'")
            skipWhitespace()
            members[key] = try parseValue()
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                index += 1
                continue
            }
            try expect(UInt8(ascii: "}"), "',' or '}'")
            depth -= 1
            return .object(members)
        }
    }

    /// Parses a string literal starting at its opening quote.
    private mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes.
        var isASCII = true
        while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte >= 0x20 {
            if byte >= 0x80 { isASCII = false }
            index += 1
        }
        if current == UInt8(ascii: "\"") {
            // ASCII is valid UTF-8 as it stands: no validation pass (keys, commands, most URLs).
            let text = isASCII
                ? String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                : try makeString(start..<index, at: start)
            index += 1
            return text
        }
        var decoded: [UInt8] = Array(bytes[start..<index])
        while true {
            guard let byte = current else { throw failure("unterminated string") }
            switch byte {
            case UInt8(ascii: "\""):
                let text = try makeString(decoded, at: start)
                index += 1
                return text
            case UInt8(ascii: "\\"):
                index += 1
                try parseEscape(into: &decoded)
            case 0..<0x20:
                throw failure("control character in a string")
            default:
                decoded.append(byte)
                index += 1
            }
        }
    }

    private func makeString(_ range: Range<Int>, at start: Int) throws(JSONParseError) -> String {
        guard let text = String(validating: bytes[range], as: UTF8.self) else {
            throw JSONParseError(reason: "invalid UTF-8 in a string", offset: start)
        }
        return text
    }

    private func makeString(_ decoded: [UInt8], at start: Int) throws(JSONParseError) -> String {
        guard let text = String(validating: decoded, as: UTF8.self) else {
            throw JSONParseError(reason: "invalid UTF-8 in a string", offset: start)
        }
        return text
    }

    /// Parses the escape after a backslash and appends its UTF-8 bytes.
    private mutating func parseEscape(into decoded: inout [UInt8]) throws(JSONParseError) {
        guard let byte = current else { throw failure("unterminated string") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(byte)
        case UInt8(ascii: "b"): decoded.append(0x08)
        case UInt8(ascii: "f"): decoded.append(0x0C)
        case UInt8(ascii: "n"): decoded.append(0x0A)
        case UInt8(ascii: "r"): decoded.append(0x0D)
        case UInt8(ascii: "t"): decoded.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try parseHex4())
            if (0xD800...0xDBFF).contains(scalar) {
                guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u")
                else { throw failure("a lone UTF-16 surrogate in a \\u escape") }
                index += 2
                let low = UInt32(try parseHex4())
                guard (0xDC00...0xDFFF).contains(low) else { throw failure("a lone UTF-16 surrogate in a \\u escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw failure("a lone UTF-16 surrogate in a \\u escape")
            }
            decoded.append(contentsOf: Array(String(Character(Unicode.Scalar(scalar)!)).utf8))
        default:
            index -= 1
            throw failure("unknown escape")
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt16 {
        guard bytes.count - index >= 4 else { throw failure("incomplete \\u escape") }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("invalid \\u escape")
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    private mutating func skipDigits() -> Int {
        let start = index
        while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
        return index - start
    }

    private mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        if current == UInt8(ascii: "-") { index += 1 }
        let integerStart = index
        let integerDigits = skipDigits()
        guard integerDigits > 0 else { throw failure("expected a digit") }
        guard integerDigits == 1 || bytes[integerStart] != UInt8(ascii: "0") else {
            throw JSONParseError(reason: "a number with a leading zero", offset: integerStart)
        }
        var isInteger = true
        if current == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard skipDigits() > 0 else { throw failure("expected a digit after '.'") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard skipDigits() > 0 else { throw failure("expected a digit in the exponent") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let exact = Int64(text) { return .int(exact) }
        guard let number = Double(text), number.isFinite else {
            throw JSONParseError(reason: "a number out of range", offset: start)
        }
        return .double(number)
    }
}
