/// What the PNG specification (third edition, chapter 11) and the APNG specification require of
/// a chunk's data, checked from its length and first bytes: a chunk shorter than its type
/// needs for the image's colour type, a palette of an impossible size, a transparency or
/// histogram chunk that does not match the palette, a text chunk without its keyword.
///
/// Fixed-size chunks may be longer than their fields: decoders read what they need and ignore
/// the rest, so only a chunk too short to hold them is refused. Every refusal is `corrupt`:
/// the chunk arrived whole (its CRC matched) and says something no decoder can use.
enum PNGChunkRules {
    /// The bytes each fixed-layout chunk needs, whatever the colour type.
    private static let minimumLengths: [UInt32: Int] = [
        PNGChunk.type("gAMA"): 4, PNGChunk.type("cHRM"): 32, PNGChunk.type("sRGB"): 1,
        PNGChunk.type("pHYs"): 9, PNGChunk.type("tIME"): 7, PNGChunk.type("oFFs"): 9,
        // sCAL: a unit byte, then two ASCII numbers of at least one digit, NUL between them.
        PNGChunk.type("sCAL"): 4,
        PNGChunk.animationControl: 8, PNGChunk.frameControl: 26, PNGChunk.frameData: 4,
    ]
    /// bKGD: a palette index (colour type 3), one grey sample (0, 4) or three RGB samples (2, 6).
    private static let backgroundLengths: [UInt8: Int] = [0: 2, 2: 6, 3: 1, 4: 2, 6: 6]
    /// sBIT: one byte per channel of the colour type (3 for a palette's RGB entries).
    private static let significantBitsLengths: [UInt8: Int] = [0: 1, 2: 3, 3: 3, 4: 2, 6: 4]
    /// tRNS for greyscale (one sample) and truecolour (three); colour type 3 is checked against the palette.
    private static let transparencyLengths: [UInt8: Int] = [0: 2, 2: 6]

    private static let background = PNGChunk.type("bKGD")
    private static let significantBits = PNGChunk.type("sBIT")
    private static let transparency = PNGChunk.type("tRNS")
    private static let histogram = PNGChunk.type("hIST")
    private static let text = PNGChunk.type("tEXt")
    private static let compressedText = PNGChunk.type("zTXt")
    private static let iccProfile = PNGChunk.type("iCCP")

    /// The types whose data head the chunk walk keeps for `check`.
    static let inspected: Set<UInt32> = Set(minimumLengths.keys).union([
        PNGChunk.palette, background, significantBits, transparency, histogram, text, compressedText,
        PNGChunk.internationalText, iccProfile,
    ])

    /// Checks `chunk` against its type's rules.
    ///
    /// - Parameters:
    ///   - colourType: IHDR's colour type.
    ///   - paletteEntries: the entries of the PLTE chunk seen so far, nil before one.
    static func check(_ chunk: PNGChunk, colourType: UInt8, paletteEntries: Int?) throws {
        let type = chunk.type
        if let minimum = minimumLengths[type] {
            try require(chunk, atLeast: minimum, "")
        }
        switch type {
        case PNGChunk.palette:
            // A palette is 1 to 256 RGB triples; libpng refuses any other PLTE in a palette image.
            guard colourType == PNGChunkStream.paletteColourType else { return }
            guard chunk.length % 3 == 0, (3...768).contains(chunk.length) else {
                throw corrupt(chunk, "holds \(chunk.length) bytes, not 1 to 256 palette entries of 3 bytes")
            }
        case background:
            try require(chunk, atLeast: backgroundLengths[colourType] ?? 0, " for colour type \(colourType)")
        case significantBits:
            try require(chunk, atLeast: significantBitsLengths[colourType] ?? 0, " for colour type \(colourType)")
        case transparency:
            if colourType == PNGChunkStream.paletteColourType {
                // One alpha value per palette entry at most (PNG 11.3.1.1); it follows PLTE.
                let entries = paletteEntries ?? 0
                guard chunk.length <= entries else {
                    throw corrupt(
                        chunk, "holds \(chunk.length) alpha values but the palette before it has \(entries) entries")
                }
            } else {
                try require(chunk, atLeast: transparencyLengths[colourType] ?? 0, " for colour type \(colourType)")
            }
        case histogram:
            // One 2-byte frequency per palette entry, after PLTE.
            let entries = paletteEntries ?? 0
            guard chunk.length == 2 * entries else {
                throw corrupt(chunk, "holds \(chunk.length) bytes, not 2 for each of the palette's \(entries) entries")
            }
        case text:
            _ = try keywordEnd(chunk)
        case compressedText, iccProfile:
            // Keyword, NUL, compression method (only 0, deflate, is defined).
            let end = try keywordEnd(chunk)
            try require(chunk, atLeast: end + 2, " to hold its keyword and compression method")
            guard chunk.head[end + 1] == 0 else {
                throw corrupt(chunk, "names compression method \(chunk.head[end + 1]); PNG defines only 0")
            }
        case PNGChunk.internationalText:
            try checkInternationalText(chunk)
        default:
            break
        }
    }

    /// iTXt: keyword, NUL, compression flag (0 or 1), compression method (0 when compressed),
    /// language tag, NUL, translated keyword, NUL, text.
    private static func checkInternationalText(_ chunk: PNGChunk) throws {
        let end = try keywordEnd(chunk)
        try require(chunk, atLeast: end + 5, " to hold its keyword, compression fields and two NULs")
        let flag = chunk.head[end + 1]
        let method = chunk.head[end + 2]
        guard flag <= 1, flag == 0 || method == 0 else {
            throw corrupt(chunk, "has compression flag \(flag) and method \(method); PNG defines flag 0 or 1 with method 0")
        }
        let nuls = chunk.head[(end + 3)...].lazy.filter { $0 == 0 }.count + chunk.laterNULs
        guard nuls >= 2 else {
            throw corrupt(chunk, "lacks the NULs that end its language tag and translated keyword")
        }
    }

    /// The index of the NUL that ends a text chunk's keyword, which must be 1 to 79 bytes.
    private static func keywordEnd(_ chunk: PNGChunk) throws -> Int {
        guard let end = chunk.head.prefix(80).firstIndex(of: 0), end >= 1 else {
            throw corrupt(chunk, "does not start with a keyword of 1 to 79 bytes followed by a NUL")
        }
        return end
    }

    private static func require(_ chunk: PNGChunk, atLeast minimum: Int, _ context: String) throws {
        guard chunk.length >= minimum else {
            throw corrupt(chunk, "holds \(chunk.length) bytes; it needs at least \(minimum)\(context)")
        }
    }

    static func corrupt(_ chunk: PNGChunk, _ problem: String) -> ImageValidationError {
        .corrupt(reason: "PNG's '\(chunk.name)' chunk at offset \(chunk.offset) \(problem)")
    }
}
