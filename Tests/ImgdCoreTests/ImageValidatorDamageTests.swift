#if canImport(Glibc)
import Glibc
#endif
import Testing
import ImgdTestSupport
@testable import ImgdCore

/// Images as the real world has them: bit flips (`corrupt`), bodies cut inside pixel data
/// (`truncated`), decompression bombs (`too_large` whatever else is wrong), and odd but valid
/// files (bytes after IEND, BigTIFF, cursors, a BMP whose size field lies).
@Suite(.offThePool) struct ImageValidatorDamageTests {
    /// Every prefix of `bytes` from `from` bytes on, one short of whole, must be refused as truncated.
    private func expectEveryCutTruncated(
        _ bytes: [UInt8], from: Int, _ label: String = "", sourceLocation: SourceLocation = #_sourceLocation
    ) {
        var wrong: [Int: Verdict] = [:]
        for length in from..<bytes.count {
            let answer = verdict(Array(bytes.prefix(length)))
            if answer != .truncated { wrong[length] = answer }
        }
        #expect(
            wrong.isEmpty, "\(label) cuts not caught: \(wrong.sorted { $0.key < $1.key }.prefix(5))",
            sourceLocation: sourceLocation)
    }

    private static let limit = 100_000_000

    // MARK: PNG

    @Test func pngWithABitFlippedInAnyChunkIsCorrupt() {
        let png = TestImages.png(width: 4, height: 4, padding: 10)
        #expect(verdict(png) == .image(.png, 4, 4))
        for type in ["IHDR", "IDAT", "pADd", "IEND"] {
            let chunk = ImageFixture.pngChunkOffset(png, type)
            var damaged = png
            // IHDR: the width's low bit (4 becomes 5, still a sane size); IDAT and pADd: a data
            // byte; IEND: its stored CRC.
            let target = switch type {
            case "IHDR": chunk + 8 + 3
            case "IEND": chunk + 8
            default: chunk + 8 + 1
            }
            damaged[target] ^= 0x01
            #expect(verdict(damaged) == .corrupt, "\(type)")
            #expect(reason(damaged)?.contains("'\(type)'") == true, "\(type)")
            #expect(reason(damaged)?.contains("CRC") == true, "\(type)")
        }
    }

    @Test func pngWithoutImageDataIsCorrupt() {
        let end = ImageFixture.pngChunk("IEND", [])
        #expect(verdict(ImageFixture.png(end)) == .corrupt)
        #expect(verdict(ImageFixture.png(ImageFixture.pngChunk("tEXt", Array("a\0b".utf8)), end)) == .corrupt)
        #expect(reason(ImageFixture.png(end))?.contains("IDAT") == true)
        // The same file with an IDAT is fine: the fixture builder is not the cause.
        let data = ImageFixture.pngChunk("IDAT", [0x78, 0x01, 0x01, 0x00, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01])
        #expect(verdict(ImageFixture.png(data, end)) == .image(.png, 4, 4))
    }

    @Test func pngWithAnImpossibleHeaderIsCorrupt() {
        let data = ImageFixture.pngChunk("IDAT", [0x78, 0x01, 0x01, 0x00, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01])
        let palette = ImageFixture.pngChunk("PLTE", [0, 0, 0, 255, 255, 255])
        let end = ImageFixture.pngChunk("IEND", [])
        for (depth, colour) in [(4, 2), (16, 3), (1, 6), (8, 7), (3, 0), (8, 1), (0, 0)] as [(UInt8, UInt8)] {
            let png = ImageFixture.png(bitDepth: depth, colourType: colour, palette, data, end)
            #expect(verdict(png) == .corrupt, "bit depth \(depth), colour type \(colour)")
        }
        for (depth, colour) in [(1, 0), (16, 0), (8, 2), (16, 2), (4, 3), (8, 4), (16, 6)] as [(UInt8, UInt8)] {
            let png = ImageFixture.png(bitDepth: depth, colourType: colour, colour == 3 ? palette : [], data, end)
            #expect(verdict(png) == .image(.png, 4, 4), "bit depth \(depth), colour type \(colour)")
        }
        #expect(reason(ImageFixture.png(bitDepth: 4, colourType: 2, data, end))?.contains("bit depth 4") == true)
        // A palette image needs its palette before the image data.
        #expect(verdict(ImageFixture.png(bitDepth: 8, colourType: 3, data, end)) == .corrupt)
        #expect(verdict(ImageFixture.png(bitDepth: 8, colourType: 3, data, palette, end)) == .corrupt)
        // Compression and filter methods other than 0, an interlace method other than 0 or 1.
        for (index, value) in [(10, 1), (11, 1), (12, 2)] as [(Int, UInt8)] {
            var ihdr: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 4, 8, 2, 0, 0, 0]
            ihdr[index] = value
            let png = ImageFixture.pngSignature + ImageFixture.pngChunk("IHDR", ihdr) + data + end
            #expect(verdict(png) == .corrupt, "IHDR byte \(index) = \(value)")
        }
    }

    @Test func pngChunkRunningPastTheEndIsTruncated() {
        let data = ImageFixture.pngChunk("IDAT", [0x78, 0x01, 0x01, 0x00, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01])
        let end = ImageFixture.pngChunk("IEND", [])
        // A chunk declaring ~4 GB, yet the file ends in a proper IEND: once accepted as 1×1.
        let liar = ImageFixture.png(width: 1, height: 1, data, ImageFixture.pngChunk("tEXt", Array("a\0b".utf8), length: 0xFFFF_FFF0), end)
        #expect(verdict(liar) == .truncated)
        #expect(reason(liar)?.contains("tEXt") == true)
        let source = CountingByteSource(liar)
        _ = verdict(of: source)
        #expect(source.reads <= 2, "the length is refused at the chunk's header, before its data")
        // Every cut of a real PNG, at a chunk boundary or inside a chunk.
        expectEveryCutTruncated(TestImages.png(width: 4, height: 4, padding: 20), from: 8)
        expectEveryCutTruncated(ImageFixture.png(data, end), from: 8)
    }

    @Test func pngChunkTypeThatIsNotFourLettersIsCorrupt() {
        let data = ImageFixture.pngChunk("IDAT", [0x78, 0x01, 0x01, 0x00, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01])
        var garbage: [UInt8] = [0, 0, 0, 0, 0x00, 0x13, 0x37, 0xFF]
        garbage.appendBE(CRC32.checksum(garbage[4..<8]))
        let png = ImageFixture.png(data, garbage, ImageFixture.pngChunk("IEND", []))
        #expect(verdict(png) == .corrupt)
        #expect(reason(png)?.contains("00 13 37 FF") == true)
    }

    /// The chunk walk is fed pieces of any size: headers and CRCs split across pieces must
    /// give the same answers as one piece, down to one byte at a time.
    @Test func pngChunkStreamGivesTheSameAnswerForEveryPieceSize() throws {
        let png = TestImages.png(width: 5, height: 3, padding: 40)
        var flipped = png
        flipped[ImageFixture.pngChunkOffset(png, "pADd") + 20] ^= 0x80
        for pieceSize in [1, 2, 3, 5, 7, 12, 13, 64, png.count] {
            func run(_ bytes: [UInt8]) throws -> PNGChunkStream {
                var stream = PNGChunkStream(bodyCount: bytes.count, start: 8, colourType: 2, width: 5, height: 3)
                var offset = 8
                while offset < bytes.count, !stream.isFinished {
                    let end = min(bytes.count, offset + pieceSize)
                    try bytes[offset..<end].withUnsafeBytes { try stream.feed($0) }
                    offset = end
                }
                return stream
            }
            let stream = try run(png)
            #expect(stream.isFinished, "piece size \(pieceSize)")
            #expect(stream.position == png.count, "piece size \(pieceSize)")
            let error = #expect(throws: ImageValidationError.self, "piece size \(pieceSize)") { try run(flipped) }
            if case .corrupt(let reason)? = error {
                #expect(reason.contains("'pADd'"))
            } else {
                Issue.record("piece size \(pieceSize): \(String(describing: error)), not corrupt")
            }
            // Bytes after IEND are not consumed.
            #expect(try run(png + [1, 2, 3]).position == png.count, "piece size \(pieceSize)")
        }
    }

    @Test func pngBombIsTooLargeEvenWhenCutShortOrDamaged() {
        let bomb = TestImages.pngHeaderOnly(width: 100_000, height: 100_000)
        let tooLarge = Verdict.tooManyPixels(width: 100_000, height: 100_000, limit: Self.limit)
        #expect(verdict(Array(bomb.prefix(40))) == tooLarge)
        var flipped = bomb
        flipped[40] ^= 0xFF  // inside IDAT
        #expect(verdict(flipped) == tooLarge)
        var badDepth = bomb
        badDepth[24] = 3  // bit depth 3 (and a wrong IHDR CRC)
        #expect(verdict(badDepth) == tooLarge)
    }

    // MARK: TIFF

    @Test func tiffCutInsideItsStripsIsTruncated() {
        let tiff = ImageFixture.tiff(width: 40, height: 10, bigEndian: false, longTags: false, strips: 4, stripBytes: 100)
        #expect(verdict(tiff) == .image(.tiff, 40, 10))
        expectEveryCutTruncated(tiff, from: 8)
        #expect(reason(Array(tiff.dropLast(1)))?.contains("strip 4 of 4") == true)
        let single = ImageFixture.tiff(width: 40, height: 10, bigEndian: true, longTags: true, stripBytes: 400)
        #expect(verdict(single) == .image(.tiff, 40, 10))
        expectEveryCutTruncated(single, from: 8)
    }

    @Test func tiffWithAnIFDThatCannotBeParsedIsCorrupt() {
        // StripOffsets as RATIONALs.
        #expect(verdict(ImageFixture.tiff(width: 4, height: 4, bigEndian: true, longTags: false, stripOffsetType: 5)) == .corrupt)
        // An entry count no directory has.
        var crowded = ImageFixture.tiff(width: 4, height: 4, bigEndian: false, longTags: false)
        crowded[8] = 0x88
        crowded[9] = 0x13  // 5000
        #expect(verdict(crowded) == .corrupt)
        // No StripOffsets nor TileOffsets: nothing says where the pixels are.
        var bare: [UInt8] = Array("II".utf8) + [42, 0, 8, 0, 0, 0, 2, 0]
        bare += [0x00, 0x01, 3, 0, 1, 0, 0, 0, 4, 0, 0, 0]  // ImageWidth 4
        bare += [0x01, 0x01, 3, 0, 1, 0, 0, 0, 4, 0, 0, 0]  // ImageLength 4
        bare += [0, 0, 0, 0] + [UInt8](repeating: 0, count: 16)
        #expect(verdict(bare) == .corrupt)
        #expect(reason(bare)?.contains("StripOffsets") == true)
    }

    /// libtiff reads missing byte counts as 0; such a strip must still start inside the body.
    @Test func tiffWithFewerByteCountsThanStripsIsCheckedAsFarAsItSays() {
        let tiff = ImageFixture.tiff(width: 40, height: 10, bigEndian: false, longTags: false, strips: 4, stripBytes: 100, stripCounts: 3)
        #expect(verdict(tiff) == .image(.tiff, 40, 10))
        #expect(verdict(Array(tiff.dropLast(101))) == .truncated)
        let big = ImageFixture.tiff(width: 40, height: 10, bigEndian: true, longTags: false, bigTIFF: true, strips: 2, stripBytes: 200, stripCounts: 1)
        #expect(verdict(big) == .image(.tiff, 40, 10))
        #expect(verdict(Array(big.dropLast(201))) == .truncated)
    }

    @Test func bigTIFFIsAcceptedWithTheSameChecks() {
        for bigEndian in [false, true] {
            let tiff = ImageFixture.tiff(
                width: 300, height: 200, bigEndian: bigEndian, longTags: true, bigTIFF: true, strips: 3, stripBytes: 50)
            #expect(verdict(tiff) == .image(.tiff, 300, 200))
            #expect(ImageValidator.sniff(Array(tiff.prefix(8)), isComplete: false) == .image(.tiff))
            expectEveryCutTruncated(tiff, from: 8, "big-endian: \(bigEndian)")
            #expect(verdict(ImageFixture.tiff(width: 4, height: 4, bigEndian: bigEndian, longTags: false, bigTIFF: true, stripOffsetType: 5)) == .corrupt)
        }
        var wrongOffsetSize = ImageFixture.tiff(width: 4, height: 4, bigEndian: false, longTags: false, bigTIFF: true)
        wrongOffsetSize[4] = 4
        #expect(verdict(wrongOffsetSize) == .corrupt)
    }

    @Test func tiffReportsItsStoredDimensionsWhateverItsOrientation() {
        for orientation in [1, 5, 6, 7, 8] {
            for bigTIFF in [false, true] {
                let tiff = ImageFixture.tiff(
                    width: 300, height: 200, bigEndian: false, longTags: false, bigTIFF: bigTIFF, orientation: orientation)
                #expect(verdict(tiff) == .image(.tiff, 300, 200), "orientation \(orientation), BigTIFF \(bigTIFF)")
            }
        }
    }

    @Test func tiffBombIsTooLargeEvenWhenCutShort() {
        let tooLarge = Verdict.tooManyPixels(width: 100_000, height: 100_000, limit: Self.limit)
        let classic = ImageFixture.tiff(width: 100_000, height: 100_000, bigEndian: false, longTags: true)
        #expect(verdict(classic) == tooLarge)
        #expect(verdict(Array(classic.prefix(8 + 2 + 2 * 12))) == tooLarge)  // cut after ImageLength's entry
        #expect(verdict(Array(classic.dropLast(1))) == tooLarge)  // cut inside its strip
        let big = ImageFixture.tiff(width: 100_000, height: 100_000, bigEndian: true, longTags: true, bigTIFF: true)
        #expect(verdict(Array(big.prefix(16 + 8 + 2 * 20))) == tooLarge)
    }

    // MARK: BMP

    @Test func bmpBombIsTooLargeEvenWhenCutShort() {
        var bomb = ImageFixture.bmp(width: 1, height: 1)
        bomb.replaceSubrange(18..<26, with: [0x20, 0x4E, 0, 0, 0x20, 0x4E, 0, 0])  // 20000 × 20000
        let tooLarge = Verdict.tooManyPixels(width: 20_000, height: 20_000, limit: Self.limit)
        #expect(verdict(bomb) == tooLarge)
        #expect(verdict(Array(bomb.prefix(26))) == tooLarge)
    }

    /// RLE, JPEG and PNG pixel data (and OS/2 2.x Huffman) say their length in biSizeImage.
    @Test func compressedBMPIsJudgedByItsStatedImageSize() {
        var rle = ImageFixture.bmp(width: 40, height: 40)
        rle.replaceSubrange(28..<30, with: [8, 0])  // 8 bits per pixel
        rle.replaceSubrange(30..<34, with: [1, 0, 0, 0])  // BI_RLE8
        rle.replaceSubrange(34..<38, with: [100, 0, 0, 0])  // 100 bytes of RLE data
        rle.replaceSubrange(46..<50, with: [2, 0, 0, 0])  // a palette of 2 colours (8 bytes) before them
        rle.replaceSubrange(10..<14, with: [14 + 40 + 8, 0, 0, 0])
        rle = Array(rle.prefix(14 + 40 + 8 + 100))
        #expect(verdict(rle) == .image(.bmp, 40, 40))
        #expect(verdict(Array(rle.dropLast(1))) == .truncated)
    }

    @Test func bmpWithAnUndefinedBitDepthIsCorrupt() {
        var bmp = ImageFixture.bmp(width: 5, height: 3)
        bmp.replaceSubrange(28..<30, with: [7, 0])
        #expect(verdict(bmp) == .corrupt)
    }

    // MARK: ICO and CUR

    @Test func icoHoldingAHugeImageIsTooLarge() {
        let tooLarge = Verdict.tooManyPixels(width: 65_535, height: 65_535, limit: Self.limit)
        let hugePNG = ImageFixture.ico(width: 16, height: 16, image: TestImages.pngHeaderOnly(width: 65_535, height: 65_535))
        #expect(verdict(hugePNG) == tooLarge)
        // A DIB whose header counts colour and mask rows: 2 × 65535.
        var dib: [UInt8] = []
        dib.appendLE(UInt32(40))
        dib.appendLE(Int32(65_535))
        dib.appendLE(Int32(2 * 65_535))
        dib += [UInt8](repeating: 0, count: 28)
        #expect(verdict(ImageFixture.ico(width: 16, height: 16, image: dib)) == tooLarge)
        // The pixel limit comes before the body's length.
        #expect(verdict(ImageFixture.ico(width: 16, height: 16, extraDeclared: 10, image: dib)) == tooLarge)
        // An entry saying 0 (256 or more) holding a PNG: the PNG's own size is reported.
        let large = ImageFixture.ico(width: 0, height: 0, image: TestImages.pngHeaderOnly(width: 512, height: 512))
        #expect(verdict(large) == .image(.ico, 512, 512))
        let small = ImageFixture.ico(width: 32, height: 32, image: TestImages.png(width: 32, height: 32))
        #expect(verdict(small) == .image(.ico, 32, 32))
    }

    @Test func curIsAcceptedAsAnIcon() {
        let cursor = ImageFixture.ico(width: 32, height: 32, type: 2)
        #expect(verdict(cursor) == .image(.ico, 32, 32))
        #expect(ImageValidator.sniff(Array(cursor.prefix(6)), isComplete: false) == .image(.ico))
        #expect(verdict(ImageFixture.ico(width: 32, height: 32, extraDeclared: 1, type: 2)) == .truncated)
        #expect(reason(ImageFixture.ico(width: 32, height: 32, extraDeclared: 1, type: 2))?.contains("CUR") == true)
        #expect(verdict(Array(cursor.prefix(15))) == .truncated)
        // Types other than icon and cursor are not icons.
        #expect(verdict(ImageFixture.ico(width: 32, height: 32, type: 3)) == .notImage)
    }

    // MARK: GIF

    /// An image descriptor and minimal data for a frame of the given size at 0,0.
    private static func gifFrame(width: Int, height: Int) -> [UInt8] {
        var frame: [UInt8] = [0x2C, 0, 0, 0, 0]
        frame.appendLE(UInt16(width))
        frame.appendLE(UInt16(height))
        return frame + [0x00, 0x02, 0x02, 0x44, 0x01, 0x00]
    }

    @Test func gifFrameOverTheLimitInsideASmallScreenIsTooLarge() {
        let tooLarge = Verdict.tooManyPixels(width: 65_535, height: 65_535, limit: Self.limit)
        let small = TestImages.gif(width: 10, height: 10)
        // The only frame, then a second one after a normal frame and an extension.
        var only = Array(small.prefix(19)) + Self.gifFrame(width: 65_535, height: 65_535) + [0x3B]
        #expect(verdict(only) == tooLarge)
        let comment: [UInt8] = [0x21, 0xFE, 0x03] + Array("hi!".utf8) + [0x00]
        let second = Array(small.dropLast()) + comment + Self.gifFrame(width: 65_535, height: 65_535) + [0x3B]
        #expect(verdict(second) == tooLarge)
        // Cut right after the frame's descriptor: still a bomb.
        only = Array(only.prefix(19 + 10))
        #expect(verdict(only) == tooLarge)
        // Normal frames pass, and a cut anywhere inside them is caught.
        let animated = Array(small.dropLast()) + comment + Self.gifFrame(width: 10, height: 10) + [0x3B]
        #expect(verdict(animated) == .image(.gif, 10, 10))
        expectEveryCutTruncated(animated, from: 6)
    }

    @Test func gifScreenBombIsTooLargeEvenWhenCutShort() {
        let bomb = TestImages.gif(width: 65_535, height: 65_535)
        #expect(verdict(Array(bomb.prefix(13))) == .tooManyPixels(width: 65_535, height: 65_535, limit: Self.limit))
    }

    // MARK: WebP, AVIF, JPEG bombs

    @Test func webpBombsAreTooLargeEvenWhenCutShort() {
        var bomb = ImageFixture.webpVP8X(width: 20_000, height: 20_000)
        bomb.replaceSubrange(4..<8, with: [0xFF, 0xFF, 0, 0])  // the RIFF size promises more than there is
        #expect(verdict(bomb) == .tooManyPixels(width: 20_000, height: 20_000, limit: Self.limit))
        // An animation frame over the limit on a small canvas.
        var frame: [UInt8] = [0, 0, 0, 0, 0, 0]
        frame += [0xFF, 0x3F, 0x00, 0xFF, 0x3F, 0x00]  // 16384 × 16384
        frame += [0x64, 0, 0, 0]
        var animation = ImageFixture.webpVP8X(width: 100, height: 100)
        animation += Array("ANMF".utf8)
        animation.appendLE(UInt32(frame.count))
        animation += frame
        animation.replaceSubrange(4..<8, with: withUnsafeBytes(of: UInt32(animation.count - 8).littleEndian, Array.init))
        #expect(verdict(animation) == .tooManyPixels(width: 16_384, height: 16_384, limit: Self.limit))
        let cutAnimation = Array(animation.dropLast(2))  // its RIFF size now promises more than there is
        #expect(verdict(cutAnimation) == .tooManyPixels(width: 16_384, height: 16_384, limit: Self.limit))
        frame.replaceSubrange(6..<12, with: [0x63, 0, 0, 0x63, 0, 0])  // 100 × 100
        var fine = ImageFixture.webpVP8X(width: 100, height: 100) + Array("ANMF".utf8)
        fine.appendLE(UInt32(frame.count))
        fine += frame
        fine.replaceSubrange(4..<8, with: withUnsafeBytes(of: UInt32(fine.count - 8).littleEndian, Array.init))
        #expect(verdict(fine) == .image(.webp, 100, 100))
    }

    @Test func avifBombsAreTooLargeEvenWhenCutShort() {
        let tooLarge = Verdict.tooManyPixels(width: 20_000, height: 20_000, limit: Self.limit)
        #expect(verdict(ImageFixture.isoImage(major: "avif", compatible: ["mif1"], sizes: [(20_000, 20_000)], mdatExtraDeclared: 10)) == tooLarge)
        // Every image's size counts, not only the primary one's.
        #expect(verdict(ImageFixture.isoImage(major: "avif", compatible: ["mif1"], sizes: [(100, 100), (20_000, 20_000)], primary: 1)) == tooLarge)
        #expect(verdict(ImageFixture.isoImage(major: "avif", compatible: ["mif1"], sizes: [(100, 100), (200, 200)], primary: 1)) == .image(.avif, 100, 100))
    }

    @Test func jpegBombIsTooLargeEvenWhenCutShort() {
        let bomb = TestImages.jpeg(width: 65_535, height: 65_535)
        let frame = bomb.indices.first { bomb[$0] == 0xFF && bomb[$0 + 1] == 0xC0 }!
        #expect(verdict(Array(bomb.prefix(frame + 12))) == .tooManyPixels(width: 65_535, height: 65_535, limit: Self.limit))
    }

    // MARK: Files

    /// A body spilled to disk is read with `pread` in pieces (no lending): the answers must be the same.
    @Test func fileSourceAgreesOnDamagedBodies() throws {
        let scratch = try ScratchFile()
        let descriptor = scratch.descriptor
        // The descriptor is used without the object below: keep the file open to the end.
        defer { withExtendedLifetime(scratch) {} }
        var flipped = TestImages.png(bytes: 600_000)
        flipped[400_000] ^= 0x01
        let bodies: [[UInt8]] = [
            TestImages.png(bytes: 600_000), flipped, Array(TestImages.png(bytes: 600_000).dropLast(5)),
            TestImages.png(width: 3, height: 3) + [0x0A],
            Array(ImageFixture.tiff(width: 40, height: 10, bigEndian: false, longTags: false, strips: 4, stripBytes: 100).dropLast(1)),
            ImageFixture.tiff(width: 4, height: 4, bigEndian: true, longTags: false, bigTIFF: true),
        ]
        let expected: [Verdict] = [.image(.png, 8, 8), .corrupt, .truncated, .image(.png, 3, 3), .truncated, .image(.tiff, 4, 4)]
        for (body, answer) in zip(bodies, expected) {
            #expect(ftruncate(descriptor, 0) == 0)
            let written = body.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
            #expect(written == body.count)
            #expect(verdict(of: FileByteSource(fileDescriptor: descriptor, count: body.count)) == answer)
            #expect(verdict(body) == answer)
        }
    }
}

/// A body spilled to a file is validated by the size the download wrote; a file that holds
/// less (a short write, a file cut under the reader) is truncated for every format, even one
/// whose own size field matches the expected size and is never compared with the file.
@Suite(.offThePool) struct ShortFileValidationTests {
    @Test func aFileShorterThanItsCountIsTruncatedInEveryFormat() throws {
        let scratch = try ScratchFile()
        let descriptor = scratch.descriptor
        // The descriptor is used without the object below: keep the file open to the end.
        defer { withExtendedLifetime(scratch) {} }
        let bodies: [[UInt8]] = [
            ImageFixture.webpVP8(width: 2, height: 2), ImageFixture.webpVP8L(width: 2, height: 2),
            ImageFixture.webpVP8X(width: 2, height: 2), ImageFixture.bmp(width: 2, height: 2),
            TestImages.png(width: 3, height: 3), TestImages.gif(width: 2, height: 2), TestImages.jpeg(width: 2, height: 2),
        ]
        for body in bodies {
            // Valid as written: the file and the count agree.
            #expect(ftruncate(descriptor, 0) == 0)
            #expect(body.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) } == body.count)
            let whole = Result { try ImageValidator().validate(FileByteSource(fileDescriptor: descriptor, count: body.count)) }
            #expect((try? whole.get()) != nil, "\(body.prefix(4)): \(whole)")
            // The same bytes with a count beyond the end of the file.
            for missing in [1, 7] {
                do {
                    let info = try ImageValidator().validate(FileByteSource(fileDescriptor: descriptor, count: body.count + missing))
                    Issue.record("validated with \(missing) bytes missing: \(info)")
                } catch let error as ImageValidationError {
                    guard case .truncated = error else {
                        Issue.record("\(body.prefix(4)) with \(missing) bytes missing: \(error), not truncated")
                        continue
                    }
                }
            }
        }
    }
}
