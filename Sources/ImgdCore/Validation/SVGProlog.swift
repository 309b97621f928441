/// Finds an SVG document's root element by skipping what XML allows before it: a byte order
/// mark, whitespace, the `<?xml …?>` declaration and other processing instructions, comments
/// and a doctype.
///
/// It works on a prefix that may still be growing, so `sniff` can say "not an image" for an HTML
/// page from its first bytes, and it never looks past `limit` bytes, so a body of endless
/// whitespace or comments is refused rather than read to its end.
enum SVGProlog {
    enum Outcome: Equatable {
        /// The `<` of `<svg` is at this offset.
        case svgRoot(at: Int)
        /// Consistent with SVG so far; more bytes could decide.
        case needMoreBytes
        /// Not SVG. The reason describes markup that is something else (an HTML document); it is
        /// nil when the bytes are not markup at all, and the caller describes them by signature.
        case notSVG(reason: String?)
    }

    /// Element names that mark an HTML page, the usual body of an error served as "200 OK".
    private static let htmlElements: Set<String> = [
        "html", "head", "body", "title", "meta", "link", "script", "style", "div", "p", "a",
        "span", "table", "br", "form", "iframe", "img", "h1", "h2", "pre", "center",
    ]

    static func scan(_ buffer: UnsafeRawBufferPointer, limit: Int, isComplete: Bool) -> Outcome {
        let bytes = UnsafeRawBufferPointer(rebasing: buffer.prefix(limit))
        func outOfBytes() -> Outcome {
            if !isComplete && buffer.count < limit { return .needMoreBytes }
            if buffer.count >= limit {
                return .notSVG(reason: "markup without an <svg> element in its first \(limit) bytes")
            }
            return .notSVG(reason: "markup that ends before any <svg> element")
        }

        var index = 0
        switch match([0xEF, 0xBB, 0xBF], in: bytes, at: 0) {
        case .matches: index = 3
        case .needMoreBytes: return outOfBytes()
        case .differs: break
        }
        while true {
            while index < bytes.count, isSpace(bytes[index]) { index += 1 }
            guard index < bytes.count else { return outOfBytes() }
            guard bytes[index] == UInt8(ascii: "<") else { return .notSVG(reason: nil) }
            guard index + 1 < bytes.count else { return outOfBytes() }
            switch bytes[index + 1] {
            case UInt8(ascii: "?"):
                guard let end = find(Array("?>".utf8), in: bytes, from: index + 2) else { return outOfBytes() }
                index = end + 2
            case UInt8(ascii: "!"):
                switch match(Array("<!--".utf8), in: bytes, at: index) {
                case .matches:
                    guard let end = find(Array("-->".utf8), in: bytes, from: index + 4) else { return outOfBytes() }
                    index = end + 3
                    continue
                case .needMoreBytes: return outOfBytes()
                case .differs: break
                }
                switch match(Array("<!doctype".utf8), in: bytes, at: index, ignoringCase: true) {
                case .matches: break
                case .needMoreBytes: return outOfBytes()
                case .differs: return .notSVG(reason: "markup that is not SVG")
                }
                var name = index + 9
                while name < bytes.count, isSpace(bytes[name]) { name += 1 }
                switch match(Array("html".utf8), in: bytes, at: name, ignoringCase: true) {
                case .matches: return .notSVG(reason: "HTML document")
                case .needMoreBytes: return outOfBytes()
                case .differs: break
                }
                guard let end = doctypeEnd(in: bytes, from: name) else { return outOfBytes() }
                index = end + 1
            default:
                // The root element. Its name can rule SVG out before it is complete ("<h" of "<html").
                var end = index + 1
                while end < bytes.count, !isNameEnd(bytes[end]) { end += 1 }
                let name = bytes[(index + 1)..<end]
                if end == bytes.count {
                    if "svg".utf8.starts(with: name) { return outOfBytes() }
                    return .notSVG(reason: "markup whose first element is not <svg>")
                }
                if name.elementsEqual("svg".utf8) { return .svgRoot(at: index) }
                return .notSVG(reason: describe(element: name))
            }
        }
    }

    /// XML's whitespace: space, tab, carriage return, line feed.
    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }

    /// The offset of the first occurrence of `token` at or after `start`.
    static func find(_ token: [UInt8], in bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard !token.isEmpty, start >= 0, bytes.count >= token.count, start <= bytes.count - token.count else {
            return nil
        }
        for offset in start...(bytes.count - token.count) where bytes[offset] == token[0] {
            if token.indices.allSatisfy({ bytes[offset + $0] == token[$0] }) { return offset }
        }
        return nil
    }

    // MARK: - Helpers

    private enum PrefixMatch { case matches, needMoreBytes, differs }

    private static func match(
        _ token: [UInt8], in bytes: UnsafeRawBufferPointer, at offset: Int, ignoringCase: Bool = false
    ) -> PrefixMatch {
        for (position, expected) in token.enumerated() {
            guard offset + position < bytes.count else { return .needMoreBytes }
            var actual = bytes[offset + position]
            if ignoringCase, (0x41...0x5A).contains(actual) { actual += 0x20 }  // tokens are lower-case
            if actual != expected { return .differs }
        }
        return .matches
    }

    private static func isNameEnd(_ byte: UInt8) -> Bool {
        isSpace(byte) || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "/")
    }

    /// The offset of the `>` closing a doctype, stepping over quoted identifiers and an internal subset in `[…]`.
    private static func doctypeEnd(in bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        var quote: UInt8?
        var depth = 0
        for offset in start..<bytes.count {
            let byte = bytes[offset]
            if let open = quote {
                if byte == open { quote = nil }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "'"): quote = byte
            case UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "]"): depth = max(0, depth - 1)
            case UInt8(ascii: ">") where depth == 0: return offset
            default: break
            }
        }
        return nil
    }

    private static func describe(element name: Slice<UnsafeRawBufferPointer>) -> String {
        let text = String(decoding: name.prefix(32), as: UTF8.self)
        if htmlElements.contains(text.lowercased()) { return "HTML document" }
        return "XML document whose root element is <\(text)>, not <svg>"
    }
}
