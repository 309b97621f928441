/// The attributes of an SVG document's root `<svg …>` start tag.
///
/// A small attribute scanner, not an XML parser: it needs only `width`, `height` and `viewBox`,
/// and whether the root closes itself (`<svg …/>`), in which case no `</svg>` will follow.
struct SVGStartTag: Equatable {
    var attributes: [String: String]
    var isSelfClosing: Bool

    /// Parses the start tag whose `<` is at `start` (the bytes there read `<svg`).
    /// Returns nil when the bytes end inside the tag.
    static func parse(_ bytes: [UInt8], at start: Int) -> SVGStartTag? {
        var attributes: [String: String] = [:]
        var index = start + 4
        func skipSpace() {
            while index < bytes.count, SVGProlog.isSpace(bytes[index]) { index += 1 }
        }
        while true {
            skipSpace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: ">"):
                return SVGStartTag(attributes: attributes, isSelfClosing: false)
            case UInt8(ascii: "/"):
                guard index + 1 < bytes.count else { return nil }
                if bytes[index + 1] == UInt8(ascii: ">") {
                    return SVGStartTag(attributes: attributes, isSelfClosing: true)
                }
                index += 1  // a stray slash; XML would reject it, we only need the size
                continue
            default:
                break
            }
            let nameStart = index
            while index < bytes.count, !isAttributeNameEnd(bytes[index]) { index += 1 }
            let name = String(decoding: bytes[nameStart..<index], as: UTF8.self)
            skipSpace()
            guard index < bytes.count else { return nil }
            guard bytes[index] == UInt8(ascii: "=") else { continue }  // a bare name: skip it
            index += 1
            skipSpace()
            guard index < bytes.count else { return nil }
            let valueStart: Int
            let valueEnd: Int
            let quote = bytes[index]
            if quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") {
                guard let close = bytes[(index + 1)...].firstIndex(of: quote) else { return nil }
                valueStart = index + 1
                valueEnd = close
                index = close + 1
            } else {
                // Unquoted values are not XML, but HTML-minded tools write them; read to the next space.
                valueStart = index
                while index < bytes.count, !SVGProlog.isSpace(bytes[index]), bytes[index] != UInt8(ascii: ">") {
                    index += 1
                }
                valueEnd = index
            }
            if attributes[name] == nil {
                attributes[name] = String(decoding: bytes[valueStart..<valueEnd], as: UTF8.self)
            }
        }
    }

    private static func isAttributeNameEnd(_ byte: UInt8) -> Bool {
        SVGProlog.isSpace(byte) || byte == UInt8(ascii: "=") || byte == UInt8(ascii: ">")
            || byte == UInt8(ascii: "/")
    }
}
