/// The lexical pieces of XML that the XML link lists share (property lists and sitemaps): white
/// space, comments and processing instructions, a DOCTYPE, CDATA sections, entity and character
/// references, names. Each reads from a ``LinkListByteSource`` one byte at a time, so it works
/// however the file is cut into reads, and holds nothing but what its caller passes in.
///
/// Only XML's five predefined entities and character references are known: no DTD is ever read,
/// so no entity can be declared, expanded or fetched (no external entities, no "billion laughs").
enum XMLLexer {
    /// The longest entity name or character reference kept (`#x0010FFFF` fits).
    static let longestEntity = 12

    /// Reads a CDATA section's content after `<![CDATA[`, up to `]]>`, into `text`.
    static func readCDATA(_ source: inout LinkListByteSource, into text: inout LinkListStringBuffer) throws(LinkListError) {
        let startLine = source.line
        /// `]` read and not yet known to be content (they may start the closing `]]>`).
        var brackets = 0
        while true {
            guard let byte = try source.next() else {
                throw source.malformed("unterminated CDATA section: the file ends before ']]>'", line: startLine)
            }
            if byte == UInt8(ascii: "]") {
                brackets += 1
                continue
            }
            let closes = byte == UInt8(ascii: ">") && brackets >= 2
            for _ in 0..<(closes ? brackets - 2 : brackets) { text.append(UInt8(ascii: "]")) }
            if !closes { text.append(byte) }
            if closes { return }
            brackets = 0
        }
    }

    /// Reads an entity or character reference after its `&`, through its `;`. `name` is scratch
    /// space (its capacity is kept); `known` says in an error which names a document may use.
    static func readEntity(
        _ source: inout LinkListByteSource, name: inout [UInt8], known: String
    ) throws(LinkListError) -> Unicode.Scalar {
        let bare = "'&' must start an entity such as &amp; (write a literal '&' as &amp;)"
        name.removeAll(keepingCapacity: true)
        while true {
            guard let byte = try source.next() else { throw source.malformed(bare) }
            if byte == UInt8(ascii: ";") { break }
            let isNameByte = byte == UInt8(ascii: "#") || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            guard isNameByte, name.count < longestEntity else { throw source.malformed(bare) }
            name.append(byte)
        }
        switch String(decoding: name, as: UTF8.self) {
        case "amp": return "&"
        case "lt": return "<"
        case "gt": return ">"
        case "quot": return "\""
        case "apos": return "'"
        case let reference where reference.hasPrefix("#"):
            let isHex = reference.hasPrefix("#x")
            let digits = reference.dropFirst(isHex ? 2 : 1)
            guard !digits.isEmpty, let value = UInt32(digits, radix: isHex ? 16 : 10),
                let scalar = Unicode.Scalar(value), isXMLCharacter(value)
            else {
                throw source.malformed("&\(reference); is not a character XML allows")
            }
            return scalar
        case let other:
            throw source.malformed("unknown entity &\(other);: \(known)")
        }
    }

    /// XML 1.0's `Char` production: what a character reference may produce.
    static func isXMLCharacter(_ value: UInt32) -> Bool {
        switch value {
        case 0x9, 0xA, 0xD, 0x20...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: true
        default: false
        }
    }

    /// Skips a DOCTYPE after `<!DOCTYPE` through its `>`, past quoted strings and an internal
    /// subset in brackets. Returns whether it had an internal subset (where entities are declared).
    @discardableResult
    static func skipDoctype(_ source: inout LinkListByteSource, startLine: Int) throws(LinkListError) -> Bool {
        var quote: UInt8?
        var inSubset = false
        var hadSubset = false
        while true {
            guard let byte = try source.next() else {
                throw source.malformed("unterminated <!DOCTYPE: the file ends before its '>'", line: startLine)
            }
            if let open = quote {
                if byte == open { quote = nil }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "'"): quote = byte
            case UInt8(ascii: "["):
                inSubset = true
                hadSubset = true
            case UInt8(ascii: "]"): inSubset = false
            case UInt8(ascii: ">") where !inSubset: return hadSubset
            default: break
            }
        }
    }

    /// Skips up to and including `terminator` (`-->`, `?>`); nothing is kept.
    static func skip(
        through terminator: StaticString, what: String, from source: inout LinkListByteSource, startLine: Int
    ) throws(LinkListError) {
        let end = UnsafeBufferPointer(start: terminator.utf8Start, count: terminator.utf8CodeUnitCount)
        let repeated = end[0]  // `-` or `?`: the terminator is this byte one or more times, then `>`
        let needed = end.count - 1
        var seen = 0
        while true {
            guard let byte = try source.next() else {
                throw source.malformed("unterminated \(what): the file ends before '\(terminator)'", line: startLine)
            }
            if byte == UInt8(ascii: ">"), seen >= needed { return }
            seen = byte == repeated ? seen + 1 : 0
        }
    }

    /// Consumes `expected` if the next bytes are it; false at the first byte that differs.
    static func consume(_ expected: StaticString, from source: inout LinkListByteSource) throws(LinkListError) -> Bool {
        let bytes = UnsafeBufferPointer(start: expected.utf8Start, count: expected.utf8CodeUnitCount)
        for byte in bytes {
            guard try source.next() == byte else { return false }
        }
        return true
    }

    /// Skips white space; true when there was some.
    @discardableResult
    static func skipWhitespace(_ source: inout LinkListByteSource) throws(LinkListError) -> Bool {
        var skipped = false
        while true {
            if !source.consumeRun(while: isWhitespace).isEmpty { skipped = true }
            // Out of buffered whitespace: the next byte decides, after a read if need be.
            guard let byte = try source.peek(), isWhitespace(byte) else { return skipped }
        }
    }

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// Text that stands for itself: not `<`, not `&`, not a control character XML forbids.
    static func isPlainText(_ byte: UInt8) -> Bool {
        (byte >= 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D) && byte != UInt8(ascii: "<") && byte != UInt8(ascii: "&")
    }

    static func isNameStart(_ byte: UInt8) -> Bool {
        (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z")) || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: ":")
    }

    static func isNameDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }
}
