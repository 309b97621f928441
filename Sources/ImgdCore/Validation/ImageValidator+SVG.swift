extension ImageValidator {
    /// How far from the end `</svg>` may be: past it, only whitespace and comments are expected.
    static let svgTailLength = 1024

    /// SVG: the size from the root `<svg>` start tag (`SVGDimensions`); a complete document
    /// ends with `</svg>` unless its root closes itself.
    ///
    /// - Parameters:
    ///   - text: the first bytes of the body, up to `svgTextLimit`.
    ///   - rootOffset: where `<svg` starts in `text`.
    func validateSVG(_ reader: inout ImageByteReader, text: [UInt8], rootOffset: Int) throws -> ImageInfo {
        var text = text
        var tag = SVGStartTag.parse(text, at: rootOffset)
        let readable = min(reader.count, Self.svgTextLimit)
        if tag == nil, text.count < readable {
            // The start tag runs past the head (long `style` or namespace attributes): read on, within bounds.
            text = try reader.bytes(at: 0, count: readable)
            tag = SVGStartTag.parse(text, at: rootOffset)
        }
        guard let tag else {
            if text.count == reader.count {
                throw ImageValidationError.truncated(reason: "SVG ends inside its <svg> start tag")
            }
            throw ImageValidationError.notImage(
                reason: "SVG's <svg> start tag does not end within the first \(Self.svgTextLimit) bytes")
        }
        let size = SVGDimensions.size(of: tag)
        if let size { try checkPixelLimit(width: size.width, height: size.height) }
        if !tag.isSelfClosing { try Self.checkSVGEnd(&reader) }
        return ImageInfo(format: .svg, width: size?.width, height: size?.height)
    }

    /// Throws `.truncated` unless the body's last KiB holds `</svg>` followed only by whitespace,
    /// comments and processing instructions (what XML allows after the root element).
    private static func checkSVGEnd(_ reader: inout ImageByteReader) throws {
        let missing = ImageValidationError.truncated(reason: "SVG has no closing </svg> tag at its end: the body ends early")
        let tailLength = min(reader.count, svgTailLength)
        let tail = try reader.bytes(at: reader.count - tailLength, count: tailLength)
        try tail.withUnsafeBytes { bytes in
            let close = Array("</svg".utf8)
            var last: Int?
            var from = 0
            while let found = SVGProlog.find(close, in: bytes, from: from) {
                last = found
                from = found + 1
            }
            guard var index = last.map({ $0 + close.count }) else { throw missing }
            while index < bytes.count, SVGProlog.isSpace(bytes[index]) { index += 1 }
            guard index < bytes.count, bytes[index] == UInt8(ascii: ">") else { throw missing }
            index += 1
            while true {
                while index < bytes.count, SVGProlog.isSpace(bytes[index]) { index += 1 }
                if index == bytes.count { return }
                let terminator: [UInt8]
                if SVGProlog.find(Array("<!--".utf8), in: bytes, from: index) == index {
                    terminator = Array("-->".utf8)
                } else if SVGProlog.find(Array("<?".utf8), in: bytes, from: index) == index {
                    terminator = Array("?>".utf8)
                } else {
                    throw missing
                }
                guard let end = SVGProlog.find(terminator, in: bytes, from: index + 2) else { throw missing }
                index = end + terminator.count
            }
        }
    }
}
