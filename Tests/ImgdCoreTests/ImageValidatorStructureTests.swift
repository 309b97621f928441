import Testing
import ImgdTestSupport
@testable import ImgdCore

/// Structures walked to the last byte their format says must be there, and what is cheap to
/// check on the way (issue 27, item 13): TIFF strips and tiles and their layout, BMP pixel
/// rows, bit masks and palettes, PNG ancillary chunks and APNG frame sequences. Each class:
/// a valid image accepted, its damaged variants refused with a reason that names the damage.
@Suite(.offThePool) struct ImageValidatorStructureTests {
    // MARK: TIFF

    /// A classic little-endian TIFF with the given entries (sorted by tag), then `pieces`
    /// strips or tiles of `pieceBytes` bytes; the offsets tag (273 or 324) is filled in.
    private static func tiff(
        _ entries: [(tag: Int, values: [Int])], offsetsTag: Int, pieces: Int, pieceBytes: Int, dropLast: Int = 0
    ) -> [UInt8] {
        var entries = entries + [(offsetsTag, [Int](repeating: 0, count: pieces))]
        entries.sort { $0.tag < $1.tag }
        let ifdEnd = 8 + 2 + 12 * entries.count + 4
        let external = entries.map { $0.values.count > 1 ? 4 * $0.values.count : 0 }
        let dataStart = ifdEnd + external.reduce(0, +)
        let offsetsIndex = entries.firstIndex { $0.tag == offsetsTag }!
        entries[offsetsIndex].values = (0..<pieces).map { dataStart + $0 * pieceBytes }
        var out: [UInt8] = Array("II".utf8)
        out.appendLE(UInt16(42))
        out.appendLE(UInt32(8))
        out.appendLE(UInt16(entries.count))
        var nextExternal = ifdEnd
        for (index, entry) in entries.enumerated() {
            out.appendLE(UInt16(entry.tag))
            out.appendLE(UInt16(4))  // LONG
            out.appendLE(UInt32(entry.values.count))
            if external[index] > 0 {
                out.appendLE(UInt32(nextExternal))
                nextExternal += external[index]
            } else {
                out.appendLE(UInt32(entry.values.first ?? 0))
            }
        }
        out.appendLE(UInt32(0))
        for entry in entries where entry.values.count > 1 {
            for value in entry.values { out.appendLE(UInt32(value)) }
        }
        out += [UInt8](repeating: 0x55, count: pieces * pieceBytes)
        return Array(out.dropLast(dropLast))
    }

    @Test func uncompressedTIFFStripsMustHoldTheirRows() {
        // 40 × 8, 8-bit grey, 2 rows per strip: 4 strips of 80 bytes.
        let good = ImageFixture.tiff(width: 40, height: 8, bigEndian: false, longTags: false, strips: 4, stripBytes: 80, compression: 1)
        #expect(verdict(good) == .image(.tiff, 40, 8))
        let short = ImageFixture.tiff(width: 40, height: 8, bigEndian: true, longTags: false, strips: 4, stripBytes: 79, compression: 1)
        #expect(verdict(short) == .corrupt)
        #expect(reason(short)?.contains("holds 79 bytes, but its rows need 80") == true)
        // The same strips compressed: their length says nothing about the rows.
        #expect(verdict(ImageFixture.tiff(width: 40, height: 8, bigEndian: true, longTags: false, strips: 4, stripBytes: 79)) == .image(.tiff, 40, 8))
        // The last strip holds what is left: 10 rows at 3 a strip end in a strip of 1 row.
        let ragged = Self.tiff(
            [(256, [40]), (257, [10]), (258, [8]), (259, [1]), (278, [3]), (279, [120, 120, 120, 40])],
            offsetsTag: 273, pieces: 4, pieceBytes: 120)
        #expect(verdict(ragged) == .image(.tiff, 40, 10))
        // Byte counts of 0 in uncompressed data, stated or missing.
        let zero = ImageFixture.tiff(width: 40, height: 8, bigEndian: false, longTags: false, strips: 4, stripBytes: 80, stripCounts: 3, compression: 1)
        #expect(verdict(zero) == .corrupt)
        #expect(reason(zero)?.contains("strip 4 of 4") == true)
        #expect(reason(zero)?.contains("byte count of 0") == true)
        // Without StripByteCounts, the rows must still be in the body.
        let uncounted = Self.tiff(
            [(256, [40]), (257, [8]), (258, [8]), (259, [1]), (278, [8])], offsetsTag: 273, pieces: 1, pieceBytes: 320)
        #expect(verdict(uncounted) == .image(.tiff, 40, 8))
        #expect(verdict(Array(uncounted.dropLast(1))) == .truncated)
    }

    @Test func tiffWithTooFewStripsForItsRowsIsCorrupt() {
        // 8 rows at 1 row a strip need 8 strips; 4 are listed.
        let tiff = ImageFixture.tiff(width: 40, height: 8, bigEndian: false, longTags: false, strips: 4, stripBytes: 80, rowsPerStrip: 1)
        #expect(verdict(tiff) == .corrupt)
        #expect(reason(tiff)?.contains("lists 4 strips, but its 8 rows at 1 rows per strip need 8") == true)
        // Planar RGB: one set of strips per sample.
        let planar: [(tag: Int, values: [Int])] = [
            (256, [10]), (257, [4]), (258, [8, 8, 8]), (259, [1]), (277, [3]), (278, [2]), (279, [20, 20, 20, 20, 20, 20]), (284, [2]),
        ]
        #expect(verdict(Self.tiff(planar, offsetsTag: 273, pieces: 6, pieceBytes: 20)) == .image(.tiff, 10, 4))
        var fewer = planar
        fewer[6].values = [20, 20, 20, 20, 20]
        let five = Self.tiff(fewer, offsetsTag: 273, pieces: 5, pieceBytes: 20)
        #expect(verdict(five) == .corrupt)
        #expect(reason(five)?.contains("once for each of 3 planes") == true)
        // Chunky, the same rows hold all three samples: 2 strips of 60 bytes.
        let chunky: [(tag: Int, values: [Int])] = [(256, [10]), (257, [4]), (258, [8, 8, 8]), (259, [1]), (277, [3]), (278, [2]), (279, [60, 60])]
        #expect(verdict(Self.tiff(chunky, offsetsTag: 273, pieces: 2, pieceBytes: 60)) == .image(.tiff, 10, 4))
        var thin = chunky
        thin[6].values = [59, 60]
        #expect(verdict(Self.tiff(thin, offsetsTag: 273, pieces: 2, pieceBytes: 60)) == .corrupt)
    }

    @Test func tiledTIFFMustListEveryTileWhole() {
        // 20 × 20 planar RGB in 16 × 16 tiles: 2 × 2 tiles a plane, 12 in all, 256 bytes each.
        func tiled(tiles: Int, bytes: Int, stated: Int? = nil, tileWidth: Int = 16) -> [UInt8] {
            Self.tiff(
                [(256, [20]), (257, [20]), (258, [8, 8, 8]), (259, [1]), (277, [3]), (284, [2]), (322, [tileWidth]), (323, [16]),
                 (325, [Int](repeating: stated ?? bytes, count: tiles))],
                offsetsTag: 324, pieces: tiles, pieceBytes: bytes)
        }
        let good = tiled(tiles: 12, bytes: 256)
        #expect(verdict(good) == .image(.tiff, 20, 20))
        #expect(verdict(Array(good.dropLast(1))) == .truncated)
        #expect(reason(Array(good.dropLast(1)))?.contains("tile 12 of 12") == true)
        let missing = tiled(tiles: 11, bytes: 256)
        #expect(verdict(missing) == .corrupt)
        #expect(reason(missing)?.contains("lists 11 tiles") == true)
        // Edge tiles are stored whole, padded: 255 bytes is one short.
        #expect(verdict(tiled(tiles: 12, bytes: 256, stated: 255)) == .corrupt)
        #expect(verdict(tiled(tiles: 12, bytes: 256, tileWidth: 0)) == .corrupt)
    }

    // MARK: BMP

    /// A BMP with a 40-byte header of the given bit depth, compression and colours used, then
    /// `gap` bytes (masks and palette) before the pixel offset, then `pixelBytes` of pixels.
    private static func bmp(
        width: Int, height: Int, bitDepth: Int, compression: Int = 0, coloursUsed: Int = 0, gap: Int, pixelBytes: Int,
        pixelOffset: Int? = nil
    ) -> [UInt8] {
        var out: [UInt8] = Array("BM".utf8)
        out.appendLE(UInt32(14 + 40 + gap + pixelBytes))
        out.appendLE(UInt32(0))
        out.appendLE(UInt32(pixelOffset ?? 14 + 40 + gap))
        out.appendLE(UInt32(40))
        out.appendLE(Int32(width))
        out.appendLE(Int32(height))
        out.appendLE(UInt16(1))
        out.appendLE(UInt16(bitDepth))
        out.appendLE(UInt32(compression))
        out.appendLE(UInt32(0))  // image size
        out += [UInt8](repeating: 0, count: 8)  // resolution
        out.appendLE(UInt32(coloursUsed))
        out.appendLE(UInt32(0))  // important colours
        return out + [UInt8](repeating: 0x11, count: gap + pixelBytes)
    }

    @Test func bmpPixelDataMustReachItsLastByte() {
        // 5 × 3 at 24 bits: rows of 15 bytes padded to 16, the last row's padding included.
        let bmp = ImageFixture.bmp(width: 5, height: 3)
        #expect(verdict(bmp) == .image(.bmp, 5, 3))
        #expect(verdict(Array(bmp.dropLast(1))) == .truncated)
        #expect(reason(Array(bmp.dropLast(1)))?.contains("48 bytes of pixel data") == true)
        // 1 bit per pixel, 9 pixels a row: 2 bytes padded to 4, times 2 rows, after a 2-colour palette.
        let mono = Self.bmp(width: 9, height: 2, bitDepth: 1, gap: 8, pixelBytes: 8)
        #expect(verdict(mono) == .image(.bmp, 9, 2))
        #expect(verdict(Array(mono.dropLast(1))) == .truncated)
        // A pixel offset of 0: the rows follow the palette.
        #expect(verdict(Self.bmp(width: 9, height: 2, bitDepth: 1, gap: 8, pixelBytes: 8, pixelOffset: 0)) == .image(.bmp, 9, 2))
        #expect(verdict(Self.bmp(width: 9, height: 2, bitDepth: 1, gap: 8, pixelBytes: 7, pixelOffset: 0)) == .truncated)
    }

    @Test func bmpPaletteMustFitItsBitDepthAndComeBeforeThePixels() {
        // 4 bits per pixel: 16 colours by default, 64 bytes of palette.
        #expect(verdict(Self.bmp(width: 8, height: 2, bitDepth: 4, gap: 64, pixelBytes: 8)) == .image(.bmp, 8, 2))
        #expect(verdict(Self.bmp(width: 8, height: 2, bitDepth: 4, coloursUsed: 5, gap: 20, pixelBytes: 8)) == .image(.bmp, 8, 2))
        // 17 colours cannot be indexed by 4 bits.
        let oversized = Self.bmp(width: 8, height: 2, bitDepth: 4, coloursUsed: 17, gap: 68, pixelBytes: 8)
        #expect(verdict(oversized) == .corrupt)
        #expect(reason(oversized)?.contains("17 colours, more than 4 bits per pixel can index (16)") == true)
        // A full 16-colour palette where only 8 entries fit before the pixel offset.
        let overlapping = Self.bmp(width: 8, height: 2, bitDepth: 4, gap: 32, pixelBytes: 8)
        #expect(verdict(overlapping) == .corrupt)
        #expect(reason(overlapping)?.contains("16-colour palette") == true)
    }

    @Test func bmpBitFieldsMasksComeBeforeThePixels() {
        // 32-bit BI_BITFIELDS after a 40-byte header: three 4-byte masks follow it.
        #expect(verdict(Self.bmp(width: 2, height: 2, bitDepth: 32, compression: 3, gap: 12, pixelBytes: 16)) == .image(.bmp, 2, 2))
        let noMasks = Self.bmp(width: 2, height: 2, bitDepth: 32, compression: 3, gap: 0, pixelBytes: 16)
        #expect(verdict(noMasks) == .corrupt)
        #expect(reason(noMasks)?.contains("bit masks") == true)
        // BI_ALPHABITFIELDS: four masks.
        #expect(verdict(Self.bmp(width: 2, height: 2, bitDepth: 32, compression: 6, gap: 16, pixelBytes: 16)) == .image(.bmp, 2, 2))
        #expect(verdict(Self.bmp(width: 2, height: 2, bitDepth: 32, compression: 6, gap: 12, pixelBytes: 16)) == .corrupt)
    }

    // MARK: PNG ancillary chunks

    private static let idat = ImageFixture.pngChunk("IDAT", [0x78, 0x01, 0x01, 0x00, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01])
    private static let iend = ImageFixture.pngChunk("IEND", [])

    /// A 4 × 4 PNG of `colourType` (8-bit; a 2-entry palette for type 3) with `chunk` before its IDAT.
    private static func png(colourType: UInt8 = 2, _ type: String, _ data: [UInt8]) -> [UInt8] {
        let palette = colourType == 3 ? ImageFixture.pngChunk("PLTE", [0, 0, 0, 255, 255, 255]) : []
        return ImageFixture.png(colourType: colourType, palette, ImageFixture.pngChunk(type, data), idat, iend)
    }

    @Test func pngAncillaryChunkShorterThanItsTypeNeedsIsCorrupt() {
        let fixed: [(String, Int)] = [("gAMA", 4), ("cHRM", 32), ("sRGB", 1), ("pHYs", 9), ("tIME", 7), ("oFFs", 9), ("sCAL", 4)]
        for (type, length) in fixed {
            #expect(verdict(Self.png(type, [UInt8](repeating: 1, count: length))) == .image(.png, 4, 4), "\(type)")
            let short = Self.png(type, [UInt8](repeating: 1, count: length - 1))
            #expect(verdict(short) == .corrupt, "\(type)")
            #expect(reason(short)?.contains("'\(type)'") == true, "\(type)")
            #expect(reason(short)?.contains("needs at least \(length)") == true, "\(type)")
        }
        // Lengths that depend on the colour type: grey 2, truecolour 6, palette index 1.
        let byColour: [(String, UInt8, Int)] = [
            ("bKGD", 0, 2), ("bKGD", 2, 6), ("bKGD", 3, 1), ("bKGD", 6, 6), ("sBIT", 0, 1), ("sBIT", 2, 3), ("sBIT", 4, 2),
            ("sBIT", 6, 4), ("tRNS", 0, 2), ("tRNS", 2, 6),
        ]
        for (type, colour, length) in byColour {
            #expect(verdict(Self.png(colourType: colour, type, [UInt8](repeating: 0, count: length))) == .image(.png, 4, 4), "\(type) \(colour)")
            #expect(verdict(Self.png(colourType: colour, type, [UInt8](repeating: 0, count: length - 1))) == .corrupt, "\(type) \(colour)")
        }
    }

    @Test func pngPaletteChunksMustMatchThePalette() {
        // The fixture's palette has 2 entries.
        #expect(verdict(Self.png(colourType: 3, "tRNS", [0, 255])) == .image(.png, 4, 4))
        let transparency = Self.png(colourType: 3, "tRNS", [0, 255, 255])
        #expect(verdict(transparency) == .corrupt)
        #expect(reason(transparency)?.contains("3 alpha values but the palette before it has 2 entries") == true)
        #expect(verdict(Self.png(colourType: 3, "hIST", [0, 1, 0, 2])) == .image(.png, 4, 4))
        #expect(verdict(Self.png(colourType: 3, "hIST", [0, 1])) == .corrupt)
        // A palette that is not whole RGB triples.
        let palette = ImageFixture.png(colourType: 3, ImageFixture.pngChunk("PLTE", [0, 0, 0, 255]), Self.idat, Self.iend)
        #expect(verdict(palette) == .corrupt)
        #expect(reason(palette)?.contains("'PLTE'") == true)
    }

    @Test func pngTextChunksNeedTheirKeyword() {
        let good: [(String, [UInt8])] = [
            ("tEXt", Array("Title\0hello".utf8)), ("zTXt", Array("Comment\0\0".utf8) + [0x78, 0x01]),
            ("iTXt", Array("Title\0\0\0en\0Titre\0bonjour".utf8)), ("iCCP", Array("sRGB\0\0".utf8) + [0x78, 0x01]),
            // A language tag longer than what the walk keeps of the chunk.
            ("iTXt", Array("Title\0\0\0".utf8) + [UInt8](repeating: 0x65, count: 200) + Array("\0\0text".utf8)),
        ]
        for (type, data) in good {
            #expect(verdict(Self.png(type, data)) == .image(.png, 4, 4), "\(type)")
        }
        let bad: [(String, [UInt8], String)] = [
            ("tEXt", Array("no separator".utf8), "keyword"), ("tEXt", Array("\0empty keyword".utf8), "keyword"),
            ("tEXt", [UInt8](repeating: 0x61, count: 80) + [0] + Array("x".utf8), "keyword"),
            ("zTXt", Array("Comment\0\u{1}x".utf8), "compression method 1"), ("zTXt", Array("Comment\0".utf8), "compression method"),
            ("iTXt", Array("Title\0\0\0en\0Titre".utf8), "NULs"), ("iTXt", Array("Title\0\u{2}\0en\0Titre\0x".utf8), "compression flag 2"),
            ("iTXt", Array("Title\0\0\0".utf8) + [UInt8](repeating: 0x65, count: 200) + Array("\0text".utf8), "NULs"),
            ("iCCP", Array("sRGB".utf8), "keyword"),
        ]
        for (type, data, words) in bad {
            let png = Self.png(type, data)
            #expect(verdict(png) == .corrupt, "\(type) \(words)")
            #expect(reason(png)?.contains(words) == true, "\(type): \(reason(png) ?? "accepted")")
        }
    }

    /// The chunk walk keeps a chunk's first bytes as they go by in pieces of any size.
    @Test func pngChunkRulesGiveTheSameAnswerForEveryPieceSize() throws {
        let long = Array("Title\0\0\0".utf8) + [UInt8](repeating: 0x65, count: 150)
        let good = Self.png("iTXt", long + Array("\0\0text".utf8))
        let bad = Self.png("iTXt", long + Array("\0text".utf8))
        let short = Self.png("cHRM", [UInt8](repeating: 1, count: 31))
        for pieceSize in [1, 2, 3, 7, 13, 64, 97, good.count] {
            func run(_ bytes: [UInt8]) throws {
                var stream = PNGChunkStream(bodyCount: bytes.count, start: 8, colourType: 2, width: 4, height: 4)
                var offset = 8
                while offset < bytes.count, !stream.isFinished {
                    let end = min(bytes.count, offset + pieceSize)
                    try bytes[offset..<end].withUnsafeBytes { try stream.feed($0) }
                    offset = end
                }
                #expect(stream.isFinished)
            }
            #expect(throws: Never.self, "piece size \(pieceSize)") { try run(good) }
            #expect(throws: ImageValidationError.self, "piece size \(pieceSize)") { try run(bad) }
            #expect(throws: ImageValidationError.self, "piece size \(pieceSize)") { try run(short) }
        }
    }

    // MARK: APNG

    private static func animationControl(frames: Int) -> [UInt8] {
        var data: [UInt8] = []
        data.appendBE(UInt32(frames))
        data.appendBE(UInt32(0))  // loop forever
        return ImageFixture.pngChunk("acTL", data)
    }

    private static func frameControl(_ sequence: Int, width: Int = 4, height: Int = 4, x: Int = 0, y: Int = 0, length: Int = 26) -> [UInt8] {
        var data: [UInt8] = []
        for value in [sequence, width, height, x, y] { data.appendBE(UInt32(value)) }
        data += [0, 1, 0, 10, 0, 0]  // delay 1/10 s, dispose none, blend source
        return ImageFixture.pngChunk("fcTL", Array(data.prefix(length)))
    }

    private static func frameData(_ sequence: Int) -> [UInt8] {
        var data: [UInt8] = []
        data.appendBE(UInt32(sequence))
        return ImageFixture.pngChunk("fdAT", data + [0x78, 0x01, 0x01, 0x00, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01])
    }

    private static func apng(_ chunks: [UInt8]...) -> [UInt8] {
        ImageFixture.pngSignature + ImageFixture.pngHeader(width: 4, height: 4) + chunks.flatMap { $0 } + iend
    }

    @Test func apngFrameSequenceMustBeWhole() {
        let good = Self.apng(
            Self.animationControl(frames: 3), Self.frameControl(0), Self.idat,
            Self.frameControl(1, width: 2, height: 2, x: 1, y: 1), Self.frameData(2), Self.frameData(3),
            Self.frameControl(4, width: 4, height: 1, x: 0, y: 3), Self.frameData(5))
        #expect(verdict(good) == .image(.png, 4, 4))
        // The default image need not be a frame: no fcTL before IDAT.
        #expect(verdict(Self.apng(Self.animationControl(frames: 1), Self.idat, Self.frameControl(0), Self.frameData(1))) == .image(.png, 4, 4))
        // No animation declared, so a still image whose frame chunks every decoder skips
        // (browsers, Pillow and libpng's APNG patch show the default image): accepted, frame
        // chunks unchecked. A second acTL is skipped.
        let still: [(String, [UInt8])] = [
            ("no frames", Self.apng(Self.animationControl(frames: 0), Self.frameControl(0), Self.idat, Self.frameControl(7))),
            ("acTL after IDAT", Self.apng(Self.frameControl(0), Self.idat, Self.animationControl(frames: 1), Self.frameData(9))),
            ("no acTL", Self.apng(Self.idat, Self.frameControl(3, width: 9), Self.frameData(1))),
            ("second acTL", Self.apng(Self.animationControl(frames: 1), Self.animationControl(frames: 5), Self.frameControl(0), Self.idat)),
        ]
        for (label, png) in still {
            #expect(verdict(png) == .image(.png, 4, 4), "\(label): \(reason(png) ?? "")")
        }

        let damaged: [(String, [UInt8], String)] = [
            ("gap", Self.apng(Self.animationControl(frames: 2), Self.frameControl(0), Self.idat, Self.frameControl(1), Self.frameData(3)), "sequence number 3 where 2"),
            ("start", Self.apng(Self.animationControl(frames: 1), Self.frameControl(1), Self.idat), "sequence number 1 where 0"),
            ("reordered", Self.apng(Self.animationControl(frames: 2), Self.frameControl(0), Self.idat, Self.frameControl(2), Self.frameData(1)), "sequence number 2 where 1"),
            ("too many frames announced", Self.apng(Self.animationControl(frames: 3), Self.frameControl(0), Self.idat, Self.frameControl(1), Self.frameData(2)), "announces 3 frames"),
            ("too few frames announced", Self.apng(Self.animationControl(frames: 1), Self.frameControl(0), Self.idat, Self.frameControl(1), Self.frameData(2)), "announces 1 frames"),
            ("off the canvas", Self.apng(Self.animationControl(frames: 2), Self.frameControl(0), Self.idat, Self.frameControl(1, width: 2, height: 2, x: 3, y: 0), Self.frameData(2)), "outside the 4×4 canvas"),
            ("empty frame", Self.apng(Self.animationControl(frames: 2), Self.frameControl(0), Self.idat, Self.frameControl(1, width: 0, height: 2), Self.frameData(2)), "empty 0×2 frame"),
            ("small default image", Self.apng(Self.animationControl(frames: 1), Self.frameControl(0, width: 3), Self.idat), "must fill the canvas"),
            ("fdAT without fcTL", Self.apng(Self.animationControl(frames: 1), Self.idat, Self.frameData(0)), "before any fcTL"),
            ("frame without data", Self.apng(Self.animationControl(frames: 2), Self.frameControl(0), Self.idat, Self.frameControl(1)), "no fdAT data"),
            ("short fcTL", Self.apng(Self.animationControl(frames: 1), Self.frameControl(0, length: 25), Self.idat), "needs at least 26"),
        ]
        for (label, png, words) in damaged {
            #expect(verdict(png) == .corrupt, "\(label)")
            #expect(reason(png)?.contains(words) == true, "\(label): \(reason(png) ?? "accepted")")
        }
    }
}
