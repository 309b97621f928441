/// TOML's four kinds of string: basic `"…"` (escapes), literal `'…'` (none), and their
/// multi-line forms `"""…"""` and `'''…'''`.
extension TOMLParser {
    /// `"…"` on one line, escapes resolved.
    mutating func readBasicString() throws(TOMLError) -> String {
        position += 1
        var bytes: [UInt8] = []
        while true {
            guard let byte = current else { throw fail("a string is not closed") }
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return String(decoding: bytes, as: UTF8.self)
            case UInt8(ascii: "\\"):
                try readEscape(into: &bytes)
            case 0x0A, 0x0D:
                throw fail("a string is not closed on its line (use \"\"\" for several lines)")
            default:
                guard !Self.isControl(byte) else { throw fail("a control character (\(Self.hex(byte))) in a string: escape it") }
                bytes.append(byte)
                position += 1
            }
        }
    }

    /// `'…'` on one line, taken as written.
    mutating func readLiteralString() throws(TOMLError) -> String {
        position += 1
        let start = position
        while true {
            guard let byte = current else { throw fail("a string is not closed") }
            switch byte {
            case UInt8(ascii: "'"):
                position += 1
                return String(decoding: text[start..<(position - 1)], as: UTF8.self)
            case 0x0A, 0x0D:
                throw fail("a string is not closed on its line (use ''' for several lines)")
            default:
                guard !Self.isControl(byte) else { throw fail("a control character (\(Self.hex(byte))) in a string") }
                position += 1
            }
        }
    }

    /// `"""…"""`: a line end right after the opening quotes is dropped; a backslash at the end
    /// of a line drops it and the blanks that follow; up to two quotes may touch the closing ones.
    mutating func readMultilineBasicString() throws(TOMLError) -> String {
        position += 3
        skipFirstLineEnd()
        var bytes: [UInt8] = []
        while true {
            guard let byte = current else { throw fail("a multi-line string is not closed (\"\"\")") }
            switch byte {
            case UInt8(ascii: "\""):
                if try closesMultiline(quote: byte, into: &bytes) { return String(decoding: bytes, as: UTF8.self) }
            case UInt8(ascii: "\\"):
                if lineEndingBackslash() {
                    trimBlanks()
                } else {
                    try readEscape(into: &bytes)
                }
            default:
                try appendMultilineByte(byte, into: &bytes)
            }
        }
    }

    /// `'''…'''`: as written, but for a line end right after the opening quotes.
    mutating func readMultilineLiteralString() throws(TOMLError) -> String {
        position += 3
        skipFirstLineEnd()
        var bytes: [UInt8] = []
        while true {
            guard let byte = current else { throw fail("a multi-line string is not closed (''')") }
            if byte == UInt8(ascii: "'") {
                if try closesMultiline(quote: byte, into: &bytes) { return String(decoding: bytes, as: UTF8.self) }
            } else {
                try appendMultilineByte(byte, into: &bytes)
            }
        }
    }

    private mutating func skipFirstLineEnd() {
        if current == 0x0A {
            position += 1
        } else if current == 0x0D, peek(1) == 0x0A {
            position += 2
        }
    }

    /// A run of quotes inside a multi-line string: fewer than three are text; three to five
    /// close it (the first one or two being text); six or more are an error.
    private mutating func closesMultiline(quote: UInt8, into bytes: inout [UInt8]) throws(TOMLError) -> Bool {
        var run = 0
        while current == quote {
            run += 1
            position += 1
        }
        guard run >= 3 else {
            bytes += repeatElement(quote, count: run)
            return false
        }
        guard run <= 5 else {
            throw fail("\(run) quotes in a row in a multi-line string: at most two may touch the closing three")
        }
        bytes += repeatElement(quote, count: run - 3)
        return true
    }

    /// Text, a tab or a line end (CRLF kept as LF) inside a multi-line string.
    private mutating func appendMultilineByte(_ byte: UInt8, into bytes: inout [UInt8]) throws(TOMLError) {
        if byte == 0x0D {
            guard peek(1) == 0x0A else { throw fail("a carriage return must be followed by a line feed") }
            position += 1
            return
        }
        guard byte == 0x0A || !Self.isControl(byte) else {
            throw fail("a control character (\(Self.hex(byte))) in a string: escape it")
        }
        bytes.append(byte)
        position += 1
    }

    /// At a backslash: whether only spaces or tabs follow it up to the line's end.
    private func lineEndingBackslash() -> Bool {
        var offset = 1
        while peek(offset) == 0x20 || peek(offset) == 0x09 { offset += 1 }
        return peek(offset) == 0x0A || (peek(offset) == 0x0D && peek(offset + 1) == 0x0A)
    }

    /// After a line-ending backslash: every space, tab and line end up to the next text.
    private mutating func trimBlanks() {
        position += 1
        while let byte = current {
            if byte == 0x20 || byte == 0x09 || byte == 0x0A {
                position += 1
            } else if byte == 0x0D, peek(1) == 0x0A {
                position += 2
            } else {
                return
            }
        }
    }

    /// `\b \t \n \f \r \" \\ \uXXXX \UXXXXXXXX`; the last two must name a Unicode scalar value
    /// (not a surrogate, at most U+10FFFF).
    private mutating func readEscape(into bytes: inout [UInt8]) throws(TOMLError) {
        let start = position
        position += 1
        guard let escaped = current else { throw fail("a string is not closed") }
        position += 1
        switch escaped {
        case UInt8(ascii: "b"): bytes.append(0x08)
        case UInt8(ascii: "t"): bytes.append(0x09)
        case UInt8(ascii: "n"): bytes.append(0x0A)
        case UInt8(ascii: "f"): bytes.append(0x0C)
        case UInt8(ascii: "r"): bytes.append(0x0D)
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(escaped)
        case UInt8(ascii: "u"), UInt8(ascii: "U"):
            let count = escaped == UInt8(ascii: "u") ? 4 : 8
            let digits = text[position..<min(position + count, text.count)]
            guard digits.count == count, digits.allSatisfy(Self.isHexDigit),
                let number = UInt32(String(decoding: digits, as: UTF8.self), radix: 16)
            else {
                throw fail("\\\(Character(Unicode.Scalar(escaped))) takes exactly \(count) hexadecimal digits", at: start)
            }
            guard let scalar = Unicode.Scalar(number) else {
                throw fail(
                    "\\\(Character(Unicode.Scalar(escaped)))\(String(decoding: digits, as: UTF8.self)) is not a Unicode scalar value", at: start,
                    withoutText: "an escape is not a Unicode scalar value")
            }
            position += count
            bytes += Array(String(Character(scalar)).utf8)
        default:
            let shown = escaped < 0x80 && !Self.isControl(escaped) ? "\\\(Character(Unicode.Scalar(escaped)))" : "a backslash"
            throw fail(
                "unknown escape \(shown) (escapes: \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX)", at: start,
                withoutText: "an unknown escape in a string (escapes: \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX)")
        }
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default: false
        }
    }
}
