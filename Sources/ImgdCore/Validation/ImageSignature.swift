/// The first bytes each binary image format starts with, checked on a prefix that may still be growing.
///
/// `ImageValidator.sniff` (bytes still arriving) and `validate` (dispatching on the format) both
/// use it, so they cannot disagree about what a format's signature is. Every binary signature
/// decides within `decisiveLength` bytes, but an ISO-BMFF `ftyp` box's brands, which may take up
/// to `brandWindow` bytes. SVG, being text, is `SVGProlog`'s business.
enum ImageSignature {
    /// What a prefix says about one format or all of them.
    enum Match: Equatable {
        case format(ImageFormat)
        /// Consistent with some signature so far, but too short to be sure.
        case needMoreBytes
        case mismatch
    }

    /// Every binary signature but ISO-BMFF's decides once this many bytes are present.
    static let decisiveLength = 32
    /// How much of an ISO-BMFF `ftyp` box's brands are read (60 compatible brands; real files
    /// have a handful). A verdict needs the whole box or this much of it, and only brands in
    /// it count, whatever more is there: a verdict on a prefix is then the verdict on the whole
    /// body, so a download is never stopped as "not an image" by a brand that comes later.
    static let brandWindow = 256

    /// The fixed signatures, in the order they are tried (nil matches any byte); made once, not
    /// at every sniff and validation.
    private static let fixedSignatures: [(bytes: [UInt8?], format: ImageFormat)] = [
        ([0xFF, 0xD8, 0xFF], .jpeg),
        ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], .png),
        (ascii("GIF87a"), .gif),
        (ascii("GIF89a"), .gif),
        (ascii("RIFF") + [nil, nil, nil, nil] + ascii("WEBP"), .webp),
        (ascii("II*") + [0x00], .tiff),
        (ascii("MM") + [0x00] + ascii("*"), .tiff),
        (ascii("II+") + [0x00], .tiff),  // BigTIFF
        (ascii("MM") + [0x00] + ascii("+"), .tiff),
    ]

    /// The binary format whose signature `prefix` carries: the first signature that matches, in
    /// the order above and then BMP, ICO and ISO-BMFF; else `needMoreBytes` if any could still
    /// match with more bytes.
    static func match(_ prefix: UnsafeRawBufferPointer) -> Match {
        var needsMore = false
        for signature in fixedSignatures {
            let found = pattern(prefix, signature.bytes, signature.format)
            if case .format = found { return found }
            if found == .needMoreBytes { needsMore = true }
        }
        for found in [bmp(prefix), ico(prefix), isoBMFF(prefix)] {
            if case .format = found { return found }
            if found == .needMoreBytes { needsMore = true }
        }
        return needsMore ? .needMoreBytes : .mismatch
    }

    /// BMP's "BM" is two common letters, so the DIB header size must look right too
    /// (12 for OS/2 core headers, 40 and up for Windows ones).
    static func isPlausibleDIBHeaderSize(_ size: Int) -> Bool {
        size == 12 || (40...1024).contains(size)
    }

    /// A short description of what a non-image body looks like, for `notImage` reasons.
    static func describe(_ head: UnsafeRawBufferPointer) -> String {
        guard !head.isEmpty else { return "empty body" }
        func starts(_ bytes: [UInt8?], at offset: Int = 0) -> Bool {
            guard head.count >= offset + bytes.count else { return false }
            return bytes.indices.allSatisfy { bytes[$0] == nil || head[offset + $0] == bytes[$0] }
        }
        if starts(ascii("%PDF-")) { return "PDF document" }
        if starts([0x1F, 0x8B]) { return "gzip-compressed data" }
        if starts(ascii("PK") + [0x03, 0x04]) { return "ZIP archive" }
        if starts(ascii("RIFF")), head.count >= 12 {
            return "RIFF file of type '\(fourCC(head, at: 8))', not WebP"
        }
        if starts(ascii("ftyp"), at: 4), head.count >= 12 {
            return "ISO-BMFF media of brand '\(fourCC(head, at: 8))', not AVIF or HEIC"
        }
        var first = head.startIndex
        if starts([0xEF, 0xBB, 0xBF]) { first += 3 }
        while first < head.endIndex, SVGProlog.isSpace(head[first]) { first += 1 }
        if first < head.endIndex, head[first] == UInt8(ascii: "{") || head[first] == UInt8(ascii: "[") {
            return "JSON"
        }
        let sample = head.prefix(64)
        if sample.allSatisfy({ (0x20...0x7E).contains($0) || SVGProlog.isSpace($0) }) { return "plain text" }
        return "unknown signature " + head.prefix(4).map(hex).joined(separator: " ")
    }

    /// A byte as two upper-case hex digits.
    static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }

    // MARK: - Matchers

    private static func ascii(_ text: String) -> [UInt8?] { text.utf8.map { $0 } }

    /// Matches fixed bytes; nil entries match any byte.
    private static func pattern(_ prefix: UnsafeRawBufferPointer, _ bytes: [UInt8?], _ format: ImageFormat) -> Match {
        for (index, expected) in bytes.enumerated() {
            guard index < prefix.count else { return .needMoreBytes }
            if let expected, prefix[index] != expected { return .mismatch }
        }
        return .format(format)
    }

    private static func bmp(_ prefix: UnsafeRawBufferPointer) -> Match {
        let start = pattern(prefix, ascii("BM"), .bmp)
        guard start == .format(.bmp) else { return start }
        guard prefix.count >= 18 else { return .needMoreBytes }
        let headerSize = Int(ImageByteOrder.littleEndian.decode(prefix[14..<18]))
        return isPlausibleDIBHeaderSize(headerSize) ? .format(.bmp) : .mismatch
    }

    /// ICO's reserved zero and type (1 for an icon, 2 for a cursor) are weak on their own; an
    /// icon must also hold at least one image.
    private static func ico(_ prefix: UnsafeRawBufferPointer) -> Match {
        var start = pattern(prefix, [0x00, 0x00, 0x01, 0x00], .ico)
        if start == .mismatch { start = pattern(prefix, [0x00, 0x00, 0x02, 0x00], .ico) }
        guard start == .format(.ico) else { return start }
        guard prefix.count >= 6 else { return .needMoreBytes }
        return ImageByteOrder.littleEndian.decode(prefix[4..<6]) >= 1 ? .format(.ico) : .mismatch
    }

    /// An ISO-BMFF file starts with an `ftyp` box whose brands say what it holds; only AVIF
    /// and HEIC brands make it an image (MP4 and QuickTime share the container).
    private static func isoBMFF(_ prefix: UnsafeRawBufferPointer) -> Match {
        // The ftyp box is small, so its 32-bit size starts with two zero bytes: checking them
        // first rejects text (an HTML page) from its first byte.
        let start = pattern(prefix, [0x00, 0x00, nil, nil] + ascii("ftyp"), .avif)
        guard start == .format(.avif) else { return start }
        let boxSize = Int(ImageByteOrder.bigEndian.decode(prefix[0..<4]))
        guard boxSize >= 16 else { return .mismatch }  // header, major brand, minor version
        let visible = min(boxSize, prefix.count, brandWindow)
        var brands: [String] = []
        if visible >= 12 { brands.append(fourCC(prefix, at: 8)) }
        var offset = 16  // compatible brands follow the minor version
        while offset + 4 <= visible {
            brands.append(fourCC(prefix, at: offset))
            offset += 4
        }
        if ISOBMFFBox.imageFormat(brands: brands) == .avif { return .format(.avif) }
        // An AVIF brand may still come later in the box; wait for it, within the window.
        guard prefix.count >= min(boxSize, brandWindow) else { return .needMoreBytes }
        return ISOBMFFBox.imageFormat(brands: brands).map { .format($0) } ?? .mismatch
    }

    private static func fourCC(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> String {
        ISOBMFFBox.fourCC(bytes[offset..<offset + 4])
    }
}
