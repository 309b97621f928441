#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
import ImgdTestSupport
@testable import ImgdCore

// MARK: - Verdicts

/// What `validate` said, without the reason text, so tests compare outcomes in one `#expect`.
enum Verdict: Equatable {
    case image(ImageFormat, Int?, Int?)
    case notImage
    case truncated
    case corrupt
    case tooManyPixels(width: Int, height: Int, limit: Int)
}

func verdict(_ bytes: [UInt8], validator: ImageValidator = ImageValidator()) -> Verdict {
    verdict(of: MemoryByteSource(bytes), validator: validator)
}

func verdict(of source: some ImageByteSource, validator: ImageValidator = ImageValidator()) -> Verdict {
    do {
        let info = try validator.validate(source)
        return .image(info.format, info.width, info.height)
    } catch ImageValidationError.notImage {
        return .notImage
    } catch ImageValidationError.truncated {
        return .truncated
    } catch ImageValidationError.corrupt {
        return .corrupt
    } catch let ImageValidationError.tooManyPixels(width, height, limit) {
        return .tooManyPixels(width: width, height: height, limit: limit)
    } catch {
        Issue.record("unexpected error \(error)")
        return .notImage
    }
}

/// The reason of a `notImage`, `truncated` or `corrupt` error, to check it says something useful.
func reason(_ bytes: [UInt8]) -> String? {
    do {
        _ = try ImageValidator().validate(MemoryByteSource(bytes))
        return nil
    } catch ImageValidationError.notImage(let reason), ImageValidationError.truncated(let reason),
        ImageValidationError.corrupt(let reason)
    {
        return reason
    } catch {
        return nil
    }
}

// MARK: - Hand-made fixtures

extension Array where Element == UInt8 {
    mutating func appendLE<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    mutating func appendBE<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }

    mutating func append(_ text: String) {
        append(contentsOf: text.utf8)
    }
}

/// Minimal headers for the formats `TestImages` does not generate. They are structurally
/// valid as far as `ImageValidator` looks, not decodable pictures.
enum ImageFixture {
    static func riff(chunk: String, payload: [UInt8], extraDeclared: Int = 0) -> [UInt8] {
        var out: [UInt8] = []
        out.append("RIFF")
        out.appendLE(UInt32(4 + 8 + payload.count + extraDeclared))
        out.append("WEBP")
        out.append(chunk)
        out.appendLE(UInt32(payload.count))
        out += payload
        return out
    }

    static func webpVP8(width: Int, height: Int, extraDeclared: Int = 0) -> [UInt8] {
        var payload: [UInt8] = [0x50, 0x02, 0x00, 0x9D, 0x01, 0x2A]
        payload.appendLE(UInt16(width))
        payload.appendLE(UInt16(height))
        payload += [UInt8](repeating: 0, count: 14)
        return riff(chunk: "VP8 ", payload: payload, extraDeclared: extraDeclared)
    }

    static func webpVP8L(width: Int, height: Int) -> [UInt8] {
        var payload: [UInt8] = [0x2F]
        payload.appendLE(UInt32(width - 1) | UInt32(height - 1) << 14)
        payload += [UInt8](repeating: 0, count: 11)
        return riff(chunk: "VP8L", payload: payload)
    }

    static func webpVP8X(width: Int, height: Int) -> [UInt8] {
        var payload: [UInt8] = [0x10, 0, 0, 0]
        payload += [UInt8(truncatingIfNeeded: width - 1), UInt8(truncatingIfNeeded: (width - 1) >> 8), UInt8(truncatingIfNeeded: (width - 1) >> 16)]
        payload += [UInt8(truncatingIfNeeded: height - 1), UInt8(truncatingIfNeeded: (height - 1) >> 8), UInt8(truncatingIfNeeded: (height - 1) >> 16)]
        payload += [UInt8](repeating: 0, count: 8)
        return riff(chunk: "VP8X", payload: payload)
    }

    /// A 24-bit BMP. `height` may be negative (top-down rows); `coreHeader` writes the 12-byte OS/2 header.
    static func bmp(width: Int, height: Int, coreHeader: Bool = false, extraDeclared: Int = 0) -> [UInt8] {
        let headerSize = coreHeader ? 12 : 40
        let rowBytes = (width * 3 + 3) / 4 * 4
        let pixels = [UInt8](repeating: 0x7F, count: rowBytes * abs(height))
        var out: [UInt8] = []
        out.append("BM")
        out.appendLE(UInt32(14 + headerSize + pixels.count + extraDeclared))
        out.appendLE(UInt32(0))
        out.appendLE(UInt32(14 + headerSize))
        out.appendLE(UInt32(headerSize))
        if coreHeader {
            out.appendLE(UInt16(width))
            out.appendLE(UInt16(height))
            out.appendLE(UInt16(1))
            out.appendLE(UInt16(24))
        } else {
            out.appendLE(Int32(width))
            out.appendLE(Int32(height))
            out.appendLE(UInt16(1))
            out.appendLE(UInt16(24))
            out += [UInt8](repeating: 0, count: 24)  // compression, image size, resolution, palette
        }
        return out + pixels
    }

    /// A TIFF (or BigTIFF) whose first IFD holds ImageWidth, ImageLength, BitsPerSample (8),
    /// Compression, StripOffsets, optionally Orientation, RowsPerStrip (the rows shared out
    /// over `strips`) and StripByteCounts, followed by `strips` strips of `stripBytes` bytes
    /// each (the pixel data comes last, as most writers put it). The strips are Deflate data
    /// (compression 8) by default, so any `stripBytes` is a possible strip (validation does
    /// not inflate them); `compression: 1` makes them uncompressed rows, which must hold
    /// `width` bytes a row. `ifdOffset` overrides the first-IFD offset written in the header
    /// (the IFD itself always follows the header); `stripCounts` overrides the number of byte
    /// counts listed, `rowsPerStrip` the rows per strip.
    static func tiff(
        width: Int, height: Int, bigEndian: Bool, longTags: Bool, ifdOffset: UInt32? = nil, bigTIFF: Bool = false,
        orientation: Int? = nil, strips: Int = 1, stripBytes: Int = 16, stripCounts: Int? = nil,
        stripOffsetType: Int? = nil, compression: Int = 8, rowsPerStrip: Int? = nil
    ) -> [UInt8] {
        var out: [UInt8] = []
        func u16(_ value: Int) { bigEndian ? out.appendBE(UInt16(value)) : out.appendLE(UInt16(value)) }
        func u32(_ value: Int) { bigEndian ? out.appendBE(UInt32(value)) : out.appendLE(UInt32(value)) }
        func u64(_ value: Int) { bigEndian ? out.appendBE(UInt64(value)) : out.appendLE(UInt64(value)) }
        func value(_ value: Int, size: Int) {
            switch size {
            case 2: u16(value)
            case 4: u32(value)
            default: u64(value)
            }
        }
        let offsetSize = bigTIFF ? 8 : 4
        let headerSize = bigTIFF ? 16 : 8
        let entrySize = bigTIFF ? 20 : 12
        let sizeType = longTags ? 4 : 3
        let offsetType = stripOffsetType ?? (bigTIFF ? 16 : 4)
        func typeSize(_ type: Int) -> Int { [3: 2, 4: 4, 5: 8, 16: 8][type]! }
        let countCount = stripCounts ?? strips
        var entries: [(tag: Int, type: Int, values: [Int])] = [
            (256, sizeType, [width]), (257, sizeType, [height]), (258, 3, [8]), (259, 3, [compression]),
            (273, offsetType, [Int](repeating: 0, count: strips)),  // filled in below
            (278, sizeType, [rowsPerStrip ?? (height + strips - 1) / max(1, strips)]),
            (279, 4, [Int](repeating: stripBytes, count: countCount)),
        ]
        if let orientation { entries.insert((274, 3, [orientation]), at: 5) }
        let ifdEnd = headerSize + (bigTIFF ? 8 : 2) + entries.count * entrySize + offsetSize
        // Arrays too long for an entry's value field go after the IFD, then the pixels.
        let external = entries.map { $0.values.count * typeSize($0.type) > offsetSize ? $0.values.count * typeSize($0.type) : 0 }
        let pixelStart = ifdEnd + external.reduce(0, +)
        entries[4].values = (0..<strips).map { pixelStart + $0 * stripBytes }

        out.append(bigEndian ? "MM" : "II")
        if bigTIFF {
            u16(43); u16(8); u16(0)
            u64(Int(ifdOffset ?? 16))
            u64(entries.count)
        } else {
            u16(42)
            u32(Int(ifdOffset ?? 8))
            u16(entries.count)
        }
        var nextExternal = ifdEnd
        for (index, entry) in entries.enumerated() {
            u16(entry.tag)
            u16(entry.type)
            value(entry.values.count, size: offsetSize)
            if external[index] > 0 {
                value(nextExternal, size: offsetSize)
                nextExternal += external[index]
            } else {
                // Values that fit sit in the entry, left-justified.
                var used = 0
                for item in entry.values {
                    value(item, size: typeSize(entry.type))
                    used += typeSize(entry.type)
                }
                out += [UInt8](repeating: 0, count: offsetSize - used)
            }
        }
        value(0, size: offsetSize)  // no next IFD
        for (index, entry) in entries.enumerated() where external[index] > 0 {
            for item in entry.values { value(item, size: typeSize(entry.type)) }
        }
        return out + [UInt8](repeating: 0x7F, count: strips * stripBytes)
    }

    /// An icon (type 1) or cursor (type 2) holding one image: `image`, or `imageBytes` zeros.
    static func ico(
        width: UInt8, height: UInt8, imageBytes: Int = 40, extraDeclared: Int = 0, type: UInt16 = 1, image: [UInt8]? = nil
    ) -> [UInt8] {
        let data = image ?? [UInt8](repeating: 0, count: imageBytes)
        var out: [UInt8] = [0, 0]
        out.appendLE(type)
        out.appendLE(UInt16(1))
        out += [width, height, 0, 0]
        out.appendLE(UInt16(1))
        out.appendLE(UInt16(32))
        out.appendLE(UInt32(data.count + extraDeclared))
        out.appendLE(UInt32(22))
        return out + data
    }

    // PNG chunks with their CRC-32.

    static func pngChunk(_ type: String, _ data: [UInt8], length: UInt32? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.appendBE(length ?? UInt32(data.count))
        let typeAndData = Array(type.utf8) + data
        out += typeAndData
        out.appendBE(CRC32.checksum(typeAndData))
        return out
    }

    static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    static func pngHeader(width: Int, height: Int, bitDepth: UInt8 = 8, colourType: UInt8 = 2) -> [UInt8] {
        var ihdr: [UInt8] = []
        ihdr.appendBE(UInt32(width))
        ihdr.appendBE(UInt32(height))
        ihdr += [bitDepth, colourType, 0, 0, 0]
        return pngChunk("IHDR", ihdr)
    }

    /// A PNG made of the given chunks after the signature and a valid IHDR.
    static func png(width: Int = 4, height: Int = 4, bitDepth: UInt8 = 8, colourType: UInt8 = 2, _ chunks: [UInt8]...) -> [UInt8] {
        pngSignature + pngHeader(width: width, height: height, bitDepth: bitDepth, colourType: colourType) + chunks.flatMap { $0 }
    }

    /// Offset of the first chunk of `type` in a PNG.
    static func pngChunkOffset(_ png: [UInt8], _ type: String) -> Int {
        var offset = 8
        while offset + 8 <= png.count {
            if png[offset + 4..<offset + 8].elementsEqual(type.utf8) { return offset }
            offset += 12 + Int(ImageByteOrder.bigEndian.decode(png[offset..<offset + 4]))
        }
        preconditionFailure("no \(type) chunk")
    }

    // ISO-BMFF boxes.

    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.appendBE(UInt32(8 + payload.count))
        out.append(type)
        return out + payload
    }

    static func fullBox(_ type: String, version: UInt8 = 0, flags: UInt8 = 0, _ payload: [UInt8]) -> [UInt8] {
        box(type, [version, 0, 0, flags] + payload)
    }

    static func fileType(major: String, compatible: [String]) -> [UInt8] {
        var payload: [UInt8] = []
        payload.append(major)
        payload.appendBE(UInt32(0))
        for brand in compatible { payload.append(brand) }
        return box("ftyp", payload)
    }

    static func spatialExtent(_ width: Int, _ height: Int) -> [UInt8] {
        var payload: [UInt8] = []
        payload.appendBE(UInt32(width))
        payload.appendBE(UInt32(height))
        return fullBox("ispe", payload)
    }

    /// An AVIF/HEIC file: `ftyp`, then `meta` > `iprp` > `ipco` with the given `ispe` sizes, then `mdat`.
    /// With `primary`, `pitm` names that item and `ipma` associates item N with property N;
    /// `mdatBytes` of image data follow, and `mdatExtraDeclared` makes `mdat` claim more than that.
    static func isoImage(
        major: String, compatible: [String], sizes: [(Int, Int)], primary: Int? = nil,
        mdatBytes: Int = 64, mdatExtraDeclared: Int = 0
    ) -> [UInt8] {
        var metaPayload = fullBox("hdlr", [0, 0, 0, 0] + Array("pict".utf8) + [UInt8](repeating: 0, count: 13))
        var iprp = box("ipco", sizes.flatMap { spatialExtent($0.0, $0.1) } + box("colr", Array("nclx".utf8) + [0, 1, 0, 1, 0, 1, 0x80]))
        if let primary {
            var pitm: [UInt8] = []
            pitm.appendBE(UInt16(primary))
            metaPayload += fullBox("pitm", pitm)
            var ipma: [UInt8] = []
            ipma.appendBE(UInt32(sizes.count))
            for item in 1...sizes.count {
                ipma.appendBE(UInt16(item))
                ipma += [2, 0x80 | UInt8(item), UInt8(sizes.count + 1)]  // its ispe (essential), and colr
            }
            iprp += fullBox("ipma", ipma)
        }
        metaPayload += box("iprp", iprp)
        let data = [UInt8](repeating: 0xA5, count: mdatBytes)
        var mdat: [UInt8] = []
        mdat.appendBE(UInt32(8 + data.count + mdatExtraDeclared))
        mdat.append("mdat")
        return fileType(major: major, compatible: compatible) + fullBox("meta", metaPayload) + mdat + data
    }

    static func text(_ string: String) -> [UInt8] { Array(string.utf8) }
}

/// An `ImageByteSource` that counts the bytes it hands out, to prove validation reads little.
final class CountingByteSource: ImageByteSource {
    let base: MemoryByteSource
    private(set) var bytesRead = 0
    private(set) var reads = 0
    private(set) var largestRead = 0

    init(_ bytes: [UInt8]) { base = MemoryByteSource(bytes) }

    var count: Int { base.count }

    func bytes(at offset: Int, count: Int) throws -> [UInt8] {
        let bytes = try base.bytes(at: offset, count: count)
        bytesRead += bytes.count
        reads += 1
        largestRead = max(largestRead, bytes.count)
        return bytes
    }
}

// MARK: - Tests

@Suite(.offThePool) struct ImageValidatorTests {
    // MARK: PNG

    @Test func pngGivesItsSize() {
        #expect(verdict(TestImages.png(width: 3, height: 5)) == .image(.png, 3, 5))
        #expect(verdict(TestImages.pngHeaderOnly(width: 1920, height: 1080)) == .image(.png, 1920, 1080))
    }

    @Test func pngCutShortIsTruncated() {
        let png = TestImages.png(width: 8, height: 8)
        #expect(png.count > 150)
        #expect(verdict(Array(png.dropLast(1))) == .truncated)
        #expect(verdict(Array(png.dropLast(100))) == .truncated)
        #expect(verdict(Array(png.prefix(20))) == .truncated)  // inside IHDR
        #expect(verdict(Array(png.prefix(8))) == .truncated)  // signature only
        #expect(reason(Array(png.dropLast(1)))?.contains("IEND") == true)
    }

    @Test func pngWithBytesAfterIENDIsAccepted() {
        // Common in the wild: a trailing newline, zero padding, an appended archive.
        let png = TestImages.png(width: 2, height: 2)
        #expect(verdict(png + [0x00]) == .image(.png, 2, 2))
        #expect(verdict(png + [0x0A]) == .image(.png, 2, 2))
        #expect(verdict(png + Array("PK\u{03}\u{04}".utf8) + [UInt8](repeating: 0xEE, count: 5000)) == .image(.png, 2, 2))
    }

    @Test func pngWithoutIHDROrWithZeroSizeIsNotImage() {
        var noHeader = TestImages.png(width: 2, height: 2)
        noHeader[12] = UInt8(ascii: "X")
        #expect(verdict(noHeader) == .notImage)
        #expect(verdict(TestImages.pngHeaderOnly(width: 0, height: 10)) == .notImage)
    }

    // MARK: JPEG

    @Test func jpegGivesItsSize() {
        #expect(verdict(TestImages.jpeg(width: 640, height: 480)) == .image(.jpeg, 640, 480))
    }

    @Test func jpegWalksSegmentsBeforeTheFrame() {
        let plain = TestImages.jpeg(width: 300, height: 200)
        // An EXIF-sized APP1 segment between SOI and the rest, plus fill bytes before a marker.
        var app1: [UInt8] = [0xFF, 0xE1]
        app1.appendBE(UInt16(2 + 5000))
        app1 += [UInt8](repeating: 0xFF, count: 5000)  // FF bytes inside a segment are data
        let withExif = Array(plain[0..<2]) + app1 + [0xFF] + Array(plain[2...])
        #expect(verdict(withExif) == .image(.jpeg, 300, 200))
        // Progressive (SOF2) frames count; DHT (C4) before the frame must not be read as one.
        var progressive = plain
        let sof = plain.indices.first { plain[$0] == 0xFF && plain[$0 + 1] == 0xC0 }!
        progressive[sof + 1] = 0xC2
        var dht: [UInt8] = [0xFF, 0xC4, 0x00, 0x14, 0x00, 0x01] + [UInt8](repeating: 0, count: 15) + [0x00]
        dht += Array(progressive[2...])
        #expect(verdict([0xFF, 0xD8] + dht) == .image(.jpeg, 300, 200))
    }

    @Test func jpegAllowsPaddingAfterEOI() {
        let jpeg = TestImages.jpeg(width: 10, height: 20)
        #expect(verdict(jpeg + [0x00, 0x00, 0x0A, 0x20]) == .image(.jpeg, 10, 20))
        #expect(verdict(jpeg + [UInt8](repeating: 0, count: 64)) == .image(.jpeg, 10, 20))
        #expect(verdict(jpeg + [UInt8](repeating: 0, count: 65)) == .truncated)
    }

    @Test func jpegCutShortIsTruncated() {
        let jpeg = TestImages.jpeg(width: 10, height: 20)
        #expect(verdict(Array(jpeg.dropLast(2))) == .truncated)  // no EOI
        #expect(verdict(Array(jpeg.dropLast(1))) == .truncated)
        #expect(verdict(Array(jpeg.prefix(30))) == .truncated)  // before the SOF
        #expect(verdict(Array(jpeg.prefix(3))) == .truncated)
        #expect(reason(Array(jpeg.dropLast(2)))?.contains("EOI") == true)
    }

    @Test func jpegWithoutFrameIsNotImage() {
        #expect(verdict([0xFF, 0xD8, 0xFF, 0xD9]) == .notImage)
        #expect(verdict([0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0xFF, 0xD9]) == .notImage)
    }

    // MARK: GIF

    @Test func gifGivesItsSize() {
        #expect(verdict(TestImages.gif(width: 17, height: 300)) == .image(.gif, 17, 300))
        var gif87 = TestImages.gif(width: 4, height: 2)
        gif87[4] = UInt8(ascii: "7")
        #expect(verdict(gif87) == .image(.gif, 4, 2))
    }

    @Test func gifWithoutTrailerIsTruncated() {
        let gif = TestImages.gif(width: 17, height: 300)
        #expect(verdict(Array(gif.dropLast())) == .truncated)
        #expect(verdict(Array(gif.prefix(8))) == .truncated)
    }

    // MARK: WebP

    @Test func webpGivesItsSizeForEachChunkKind() {
        #expect(verdict(ImageFixture.webpVP8(width: 400, height: 301)) == .image(.webp, 400, 301))
        #expect(verdict(ImageFixture.webpVP8L(width: 16383, height: 2)) == .image(.webp, 16383, 2))
        #expect(verdict(ImageFixture.webpVP8X(width: 20000, height: 3000)) == .image(.webp, 20000, 3000))
    }

    @Test func webpShorterThanItsRIFFSizeIsTruncated() {
        #expect(verdict(ImageFixture.webpVP8(width: 4, height: 4, extraDeclared: 2)) == .truncated)
        #expect(verdict(Array(ImageFixture.webpVP8L(width: 4, height: 4).dropLast())) == .truncated)
        #expect(reason(ImageFixture.webpVP8(width: 4, height: 4, extraDeclared: 2))?.contains("RIFF") == true)
    }

    @Test func riffThatIsNotWebPIsNotImage() {
        var wave = ImageFixture.webpVP8(width: 4, height: 4)
        wave.replaceSubrange(8..<12, with: Array("WAVE".utf8))
        #expect(verdict(wave) == .notImage)
        #expect(reason(wave)?.contains("WAVE") == true)
    }

    // MARK: BMP

    @Test func bmpGivesItsSize() {
        #expect(verdict(ImageFixture.bmp(width: 5, height: 3)) == .image(.bmp, 5, 3))
        #expect(verdict(ImageFixture.bmp(width: 5, height: -3)) == .image(.bmp, 5, 3))  // top-down
        #expect(verdict(ImageFixture.bmp(width: 7, height: 2, coreHeader: true)) == .image(.bmp, 7, 2))
    }

    @Test func bmpShorterThanItsPixelDataIsTruncated() {
        let bmp = ImageFixture.bmp(width: 5, height: 3)  // 3 rows of 15 bytes padded to 16
        #expect(verdict(Array(bmp.dropLast(4))) == .truncated)
        #expect(verdict(Array(bmp.dropLast(17))) == .truncated)  // a whole row missing
        #expect(verdict(Array(bmp.prefix(14 + 40))) == .truncated)  // no pixels at all
        #expect(verdict(Array(ImageFixture.bmp(width: 7, height: 2, coreHeader: true).dropLast(8))) == .truncated)
        #expect(reason(Array(bmp.dropLast(4)))?.contains("pixel data") == true)
        // The last row's padding is part of the pixel data too (browsers read whole padded rows).
        #expect(verdict(Array(bmp.dropLast(1))) == .truncated)
    }

    @Test func bmpWhoseFileSizeFieldIsTooLargeIsJudgedByItsPixels() {
        // bfSize larger than the file, but every row the header describes is there.
        #expect(verdict(ImageFixture.bmp(width: 5, height: 3, extraDeclared: 1)) == .image(.bmp, 5, 3))
        #expect(verdict(ImageFixture.bmp(width: 5, height: 3, extraDeclared: 1_000_000)) == .image(.bmp, 5, 3))
        #expect(verdict(Array(ImageFixture.bmp(width: 5, height: 3, extraDeclared: 1).dropLast(4))) == .truncated)
    }

    // MARK: TIFF

    @Test func tiffGivesItsSizeInBothByteOrdersAndFieldTypes() {
        #expect(verdict(ImageFixture.tiff(width: 300, height: 200, bigEndian: false, longTags: false)) == .image(.tiff, 300, 200))
        #expect(verdict(ImageFixture.tiff(width: 300, height: 200, bigEndian: true, longTags: false)) == .image(.tiff, 300, 200))
        #expect(verdict(ImageFixture.tiff(width: 70000, height: 3, bigEndian: false, longTags: true)) == .image(.tiff, 70000, 3))
        #expect(verdict(ImageFixture.tiff(width: 70000, height: 3, bigEndian: true, longTags: true)) == .image(.tiff, 70000, 3))
    }

    @Test func tiffWhoseFirstIFDLiesPastTheEndIsTruncated() {
        #expect(verdict(ImageFixture.tiff(width: 3, height: 3, bigEndian: false, longTags: false, ifdOffset: 5000)) == .truncated)
        #expect(verdict(Array(ImageFixture.tiff(width: 3, height: 3, bigEndian: true, longTags: false).prefix(20))) == .truncated)
        #expect(verdict(ImageFixture.tiff(width: 3, height: 3, bigEndian: false, longTags: false, ifdOffset: 4)) == .notImage)
    }

    // MARK: ICO

    @Test func icoGivesTheFirstEntrysSizeWithZeroMeaning256() {
        #expect(verdict(ImageFixture.ico(width: 16, height: 32)) == .image(.ico, 16, 32))
        #expect(verdict(ImageFixture.ico(width: 0, height: 0)) == .image(.ico, 256, 256))
    }

    @Test func icoWhoseImageRunsPastTheEndIsTruncated() {
        #expect(verdict(ImageFixture.ico(width: 16, height: 16, extraDeclared: 1)) == .truncated)
        #expect(verdict(Array(ImageFixture.ico(width: 16, height: 16).prefix(15))) == .truncated)
    }

    // MARK: AVIF and HEIC

    @Test func avifAndHeicGiveTheirSizeFromIspe() {
        #expect(verdict(ImageFixture.isoImage(major: "avif", compatible: ["mif1", "miaf"], sizes: [(1200, 800)])) == .image(.avif, 1200, 800))
        #expect(verdict(ImageFixture.isoImage(major: "heic", compatible: ["mif1", "heic"], sizes: [(4032, 3024)])) == .image(.heic, 4032, 3024))
        // mif1 alone is HEIF, which imgd calls heic; with an AVIF brand it is AVIF.
        #expect(verdict(ImageFixture.isoImage(major: "mif1", compatible: ["miaf"], sizes: [(10, 20)])) == .image(.heic, 10, 20))
        #expect(verdict(ImageFixture.isoImage(major: "mif1", compatible: ["miaf", "avif"], sizes: [(10, 20)])) == .image(.avif, 10, 20))
    }

    @Test func isoImageWithoutIspeHasNoSize() {
        #expect(verdict(ImageFixture.isoImage(major: "avif", compatible: [], sizes: [])) == .image(.avif, nil, nil))
    }

    @Test func heicGridUsesThePrimaryItemsSize() {
        let tilesFirst = [(512, 512), (4032, 3024)]
        #expect(verdict(ImageFixture.isoImage(major: "heic", compatible: ["mif1"], sizes: tilesFirst, primary: 2)) == .image(.heic, 4032, 3024))
        #expect(verdict(ImageFixture.isoImage(major: "heic", compatible: ["mif1"], sizes: tilesFirst)) == .image(.heic, 512, 512))
    }

    @Test func isoImageWhoseBoxRunsPastTheEndIsTruncated() {
        let avif = ImageFixture.isoImage(major: "avif", compatible: ["mif1"], sizes: [(4, 4)])
        #expect(verdict(ImageFixture.isoImage(major: "avif", compatible: ["mif1"], sizes: [(4, 4)], mdatExtraDeclared: 1)) == .truncated)
        #expect(verdict(Array(avif.dropLast(10))) == .truncated)
        #expect(verdict(Array(avif.prefix(40))) == .truncated)
    }

    @Test func isoMediaThatIsNotAnImageIsNotImage() {
        let video = ImageFixture.fileType(major: "isom", compatible: ["iso2", "mp41"]) + ImageFixture.box("mdat", [1, 2, 3])
        #expect(verdict(video) == .notImage)
        #expect(ImageValidator.sniff(video, isComplete: true) == .notImage)
    }

    // MARK: SVG

    @Test func svgGivesItsSizeFromAttributes() {
        let svg = ImageFixture.text(#"<svg xmlns="http://www.w3.org/2000/svg" width="120" height="80.4px"><rect/></svg>"#)
        #expect(verdict(svg) == .image(.svg, 120, 80))
        #expect(verdict(ImageFixture.text("<svg width='10.5px' height=' 7 '></svg>")) == .image(.svg, 11, 7))
    }

    @Test func svgFallsBackToViewBox() {
        #expect(verdict(ImageFixture.text(#"<svg viewBox="0 0 300 150"></svg>"#)) == .image(.svg, 300, 150))
        #expect(verdict(ImageFixture.text(#"<svg width="100%" height="100%" viewBox="0,0,64.2,32"></svg>"#)) == .image(.svg, 64, 32))
        // One plain length: the other follows the viewBox's aspect ratio.
        #expect(verdict(ImageFixture.text(#"<svg width="600" viewBox="0 0 300 150"></svg>"#)) == .image(.svg, 600, 300))
        #expect(verdict(ImageFixture.text(#"<svg width="2em" height="1em"></svg>"#)) == .image(.svg, nil, nil))
        #expect(verdict(ImageFixture.text("<svg></svg>")) == .image(.svg, nil, nil))
    }

    @Test func svgAfterPrologCommentsAndDoctype() {
        let svg = ImageFixture.text(
            "\u{FEFF}\n  <?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- Generator: a tool -->\n"
                + "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\" [ <!ENTITY a \"b>\"> ]>\n"
                + "<svg version=\"1.1\"\n  width=\"48\" height=\"24\">\n<g/>\n</svg>\n\n<!-- end -->\n")
        #expect(verdict(svg) == .image(.svg, 48, 24))
    }

    @Test func svgWithALongPrologIsStillFound() {
        let comment = "<!--" + String(repeating: "x", count: 5000) + "-->"
        #expect(verdict(ImageFixture.text(comment + "<svg width='1' height='2'/>")) == .image(.svg, 1, 2))
    }

    @Test func svgWithoutItsClosingTagIsTruncated() {
        let svg = #"<svg width="10" height="10"><rect width="5" height="5"/></svg>"#
        #expect(verdict(ImageFixture.text(svg + "  \r\n")) == .image(.svg, 10, 10))
        #expect(verdict(ImageFixture.text(String(svg.dropLast(1)))) == .truncated)
        #expect(verdict(ImageFixture.text(String(svg.dropLast(6)))) == .truncated)
        #expect(verdict(ImageFixture.text("<svg width=\"10")) == .truncated)  // inside the start tag
        #expect(verdict(ImageFixture.text(svg + "<rect/>")) == .truncated)
        #expect(verdict(ImageFixture.text(#"<svg width="3" height="4"/>"#)) == .image(.svg, 3, 4))  // self-closing
    }

    @Test func svgClosingTagMustBeNearTheEnd() {
        let svg = "<svg width='1' height='1'></svg>" + String(repeating: " ", count: 1100) + "<!-- x -->"
        #expect(verdict(ImageFixture.text(svg)) == .truncated)
    }

    // MARK: Not images

    @Test func htmlJSONEmptyAndRandomBytesAreNotImages() {
        #expect(verdict(TestImages.htmlPage) == .notImage)
        #expect(reason(TestImages.htmlPage) == "HTML document")
        #expect(reason(ImageFixture.text("\n<html><body>hi</body></html>")) == "HTML document")
        #expect(reason(ImageFixture.text("<?xml version='1.0'?><!-- x --><html xmlns='http://www.w3.org/1999/xhtml'/>")) == "HTML document")
        #expect(reason(ImageFixture.text(#"  {"error": "not found"}"#)) == "JSON")
        #expect(reason([]) == "empty body")
        #expect(verdict([0x13, 0x37, 0xC0]) == .notImage)
        #expect(reason([0x13, 0x37, 0xC0, 0xDE, 0x01]) == "unknown signature 13 37 C0 DE")
        #expect(verdict(ImageFixture.text("<rss version='2.0'><channel/></rss>")) == .notImage)
        #expect(verdict(ImageFixture.text("%PDF-1.7\n")) == .notImage)
        #expect(verdict([0x89, 0x50, 0x4E]) == .notImage)
    }

    // MARK: Pixel limit

    @Test func pixelLimitRefusesHugeImages() {
        #expect(verdict(TestImages.pngHeaderOnly(width: 100_000, height: 100_000))
            == .tooManyPixels(width: 100_000, height: 100_000, limit: 100_000_000))
        #expect(verdict(TestImages.pngHeaderOnly(width: 10_000, height: 10_000)) == .image(.png, 10_000, 10_000))
        let small = ImageValidator(maxPixels: 100)
        #expect(verdict(TestImages.gif(width: 10, height: 10), validator: small) == .image(.gif, 10, 10))
        #expect(verdict(TestImages.gif(width: 11, height: 10), validator: small) == .tooManyPixels(width: 11, height: 10, limit: 100))
        #expect(verdict(ImageFixture.webpVP8X(width: 1 << 24, height: 1 << 24)) == .tooManyPixels(width: 1 << 24, height: 1 << 24, limit: 100_000_000))
        #expect(verdict(ImageFixture.text("<svg width='1e6' height='1e6'/>")) == .tooManyPixels(width: 1_000_000, height: 1_000_000, limit: 100_000_000))
        // Pixel count that overflows Int.
        let maxValidator = ImageValidator(maxPixels: .max)
        #expect(throws: Never.self) { try maxValidator.checkPixelLimit(width: 1 << 31, height: 1 << 31) }
        #expect(throws: ImageValidationError.self) { try maxValidator.checkPixelLimit(width: Int.max, height: 2) }
    }

    // MARK: Sniffing

    /// One real image of every format, as complete bodies.
    static let everyFormat: [(ImageFormat, [UInt8])] = [
        (.png, TestImages.png(width: 4, height: 4)),
        (.jpeg, TestImages.jpeg(width: 4, height: 4)),
        (.gif, TestImages.gif(width: 4, height: 4)),
        (.webp, ImageFixture.webpVP8(width: 4, height: 4)),
        (.webp, ImageFixture.webpVP8L(width: 4, height: 4)),
        (.webp, ImageFixture.webpVP8X(width: 4, height: 4)),
        (.bmp, ImageFixture.bmp(width: 4, height: 4)),
        (.bmp, ImageFixture.bmp(width: 4, height: 4, coreHeader: true)),
        (.tiff, ImageFixture.tiff(width: 4, height: 4, bigEndian: false, longTags: false)),
        (.tiff, ImageFixture.tiff(width: 4, height: 4, bigEndian: true, longTags: true)),
        (.tiff, ImageFixture.tiff(width: 4, height: 4, bigEndian: false, longTags: false, bigTIFF: true)),
        (.tiff, ImageFixture.tiff(width: 4, height: 4, bigEndian: true, longTags: true, bigTIFF: true)),
        (.ico, ImageFixture.ico(width: 4, height: 4)),
        (.ico, ImageFixture.ico(width: 4, height: 4, type: 2)),  // a cursor
        (.avif, ImageFixture.isoImage(major: "avif", compatible: ["mif1", "miaf", "MA1B"], sizes: [(4, 4)])),
        (.avif, ImageFixture.isoImage(major: "mif1", compatible: ["miaf", "avif"], sizes: [(4, 4)])),
        (.heic, ImageFixture.isoImage(major: "heic", compatible: ["mif1", "heic"], sizes: [(4, 4)])),
        (.svg, ImageFixture.text("<svg width='4' height='4'/>")),
        (.svg, ImageFixture.text("\u{FEFF}<?xml version='1.0'?>\n<!-- made by hand -->\n<!DOCTYPE svg>\n<svg width='4' height='4'></svg>")),
    ]

    @Test func everyFixtureValidatesAsItsFormat() {
        for (format, bytes) in Self.everyFormat {
            #expect(verdict(bytes) == .image(format, 4, 4), "\(format)")
        }
    }

    @Test func sniffAnswersOnShortPrefixes() {
        #expect(ImageValidator.sniff([], isComplete: false) == .needMoreBytes)
        #expect(ImageValidator.sniff([], isComplete: true) == .notImage)
        #expect(ImageValidator.sniff([0x89], isComplete: false) == .needMoreBytes)
        #expect(ImageValidator.sniff([0x89], isComplete: true) == .notImage)
        for (format, image) in [
            (ImageFormat.png, TestImages.png(width: 4, height: 4)), (.jpeg, TestImages.jpeg(width: 4, height: 4)),
            (.gif, TestImages.gif(width: 4, height: 4)),
        ] {
            for length in 8...32 {
                #expect(ImageValidator.sniff(Array(image.prefix(length)), isComplete: false) == .image(format))
            }
        }
    }

    @Test func sniffRefusesHTMLEarly() {
        #expect(ImageValidator.sniff(TestImages.htmlPage, isComplete: false) == .notImage)
        #expect(ImageValidator.sniff(Array(TestImages.htmlPage.prefix(14)), isComplete: false) == .notImage)  // "<!DOCTYPE html"
        #expect(ImageValidator.sniff(ImageFixture.text("<html>"), isComplete: false) == .notImage)
        #expect(ImageValidator.sniff(ImageFixture.text("<h"), isComplete: false) == .notImage)
        #expect(ImageValidator.sniff(ImageFixture.text(#"{"a":1}"#), isComplete: false) == .notImage)
        #expect(ImageValidator.sniff(ImageFixture.text("<!DOCTYPE sv"), isComplete: false) == .needMoreBytes)
        #expect(ImageValidator.sniff(ImageFixture.text("<sv"), isComplete: false) == .needMoreBytes)
    }

    @Test func sniffOnCompleteShortBodies() {
        #expect(ImageValidator.sniff(ImageFixture.text("<svg/>"), isComplete: true) == .image(.svg))
        #expect(ImageValidator.sniff(ImageFixture.text("<sv"), isComplete: true) == .notImage)
        #expect(ImageValidator.sniff([0xFF, 0xD8, 0xFF], isComplete: true) == .image(.jpeg))
        #expect(ImageValidator.sniff([0x13, 0x37, 0xC0], isComplete: true) == .notImage)
        let ico = ImageFixture.ico(width: 1, height: 1)
        #expect(ImageValidator.sniff(ico, isComplete: true) == .image(.ico))
    }

    @Test func sniffGivesUpOnTextWithoutSVGAfter1024Bytes() {
        let blank = [UInt8](repeating: 0x20, count: 1023)
        #expect(ImageValidator.sniff(blank, isComplete: false) == .needMoreBytes)
        #expect(ImageValidator.sniff(blank + [0x20], isComplete: false) == .notImage)
        let comment = ImageFixture.text("<!--" + String(repeating: "-", count: 2000))
        #expect(ImageValidator.sniff(comment, isComplete: false) == .notImage)
    }

    @Test func sniffOverARawBufferAgreesWithArrays() {
        for (_, bytes) in Self.everyFormat {
            for length in [1, 5, 12, 32] {
                let prefix = Array(bytes.prefix(length))
                let viaBuffer = prefix.withUnsafeBytes { ImageValidator.sniff($0, isComplete: false) }
                #expect(viaBuffer == ImageValidator.sniff(prefix, isComplete: false))
            }
        }
    }

    /// Bytes arrive a few at a time: no prefix of a real image may be refused, and binary
    /// formats are recognised by 32 bytes.
    @Test func dripFedSniffNeverRefusesARealImage() {
        for (format, bytes) in Self.everyFormat {
            for length in 0...min(64, bytes.count) {
                let answer = ImageValidator.sniff(Array(bytes.prefix(length)), isComplete: false)
                #expect(answer != .notImage, "\(format) refused at \(length) bytes")
                if answer != .needMoreBytes { #expect(answer == .image(format), "\(format) at \(length) bytes") }
            }
            if format != .svg {
                #expect(ImageValidator.sniff(Array(bytes.prefix(32)), isComplete: false) == .image(format))
            }
            #expect(ImageValidator.sniff(bytes, isComplete: true) == .image(format))
        }
    }

    // MARK: Byte sources

    @Test func fileSourceGivesTheSameAnswersAsMemory() throws {
        let scratch = try ScratchFile()
        let descriptor = scratch.descriptor
        // The descriptor is used without the object below: keep the file open to the end.
        defer { withExtendedLifetime(scratch) {} }
        let bodies = Self.everyFormat.map(\.1) + [
            Array(TestImages.png(width: 8, height: 8).dropLast(3)), TestImages.htmlPage,
            TestImages.pngHeaderOnly(width: 100_000, height: 100_000),
        ]
        for body in bodies {
            #expect(ftruncate(descriptor, 0) == 0)
            let written = body.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
            #expect(written == body.count)
            let file = FileByteSource(fileDescriptor: descriptor, count: body.count)
            #expect(verdict(of: file) == verdict(body))
            #expect(try file.bytes(at: 1, count: 4) == Array(body.dropFirst().prefix(4)))
            #expect(try file.bytes(at: body.count, count: 4) == [])
        }
    }

    @Test func fileSourceReportsReadErrors() {
        let file = FileByteSource(fileDescriptor: -1, count: 100)
        let error = #expect(throws: FileReadError.self) { try ImageValidator().validate(file) }
        #expect(error?.errno == EBADF)
    }

    @Test func memorySourceReturnsFewerBytesOnlyAtTheEnd() throws {
        let source = MemoryByteSource([1, 2, 3, 4])
        #expect(try source.bytes(at: 1, count: 2) == [2, 3])
        #expect(try source.bytes(at: 2, count: 10) == [3, 4])
        #expect(try source.bytes(at: 4, count: 1) == [])
    }

    @Test func largePNGIsReadOnceInBoundedPieces() {
        // A 5 MB PNG: a small image plus a big ancillary chunk before IEND. Every CRC is
        // checked, so every byte is read: once, in pieces no larger than pngPieceSize.
        let small = TestImages.png(width: 8, height: 8)
        let padding = ImageFixture.pngChunk("pADd", [UInt8](repeating: 0x20, count: 5_000_000))
        let big = Array(small.dropLast(12)) + padding + Array(small.suffix(12))
        let source = CountingByteSource(big)
        #expect(verdict(of: source) == .image(.png, 8, 8))
        #expect(source.bytesRead >= big.count - 8)
        #expect(source.bytesRead <= big.count + ImageByteReader.windowSize)
        #expect(source.largestRead <= ImageValidator.pngPieceSize)

        #expect(verdict(of: CountingByteSource(Array(big.dropLast(1)))) == .truncated)
        var damaged = big
        damaged[3_000_000] ^= 0x10
        #expect(verdict(of: CountingByteSource(damaged)) == .corrupt)
        #expect(verdict(damaged) == .corrupt)  // memory, lent without copies
    }

    @Test func largeImagesOfOtherFormatsReadLittle() {
        let bulk = [UInt8](repeating: 0, count: 2_000_000)
        var gif = TestImages.gif(width: 5, height: 5)
        gif.insert(contentsOf: bulk, at: gif.count - 1)
        let avif = ImageFixture.isoImage(major: "avif", compatible: ["mif1"], sizes: [(5, 5)], mdatBytes: bulk.count)
        for (format, body) in [(ImageFormat.gif, gif), (.avif, avif)] {
            let source = CountingByteSource(body)
            #expect(verdict(of: source) == .image(format, 5, 5))
            #expect(source.bytesRead < 64 * 1024, "\(format) read \(source.bytesRead) bytes")
        }
    }
}

/// A sniffed verdict on a prefix is the verdict on the whole body: an `ftyp` box whose AVIF
/// brand comes after its first 32 bytes is not refused early (a download would have been
/// stopped as "not an image"), and brands past the window do not count in any prefix.
@Suite(.offThePool) struct ISOBMFFSniffWindowTests {
    /// An ftyp box of `brands` compatible brands, the last one `last`.
    static func ftyp(major: String, filler: Int, last: String) -> [UInt8] {
        let brands = Array(repeating: "isom", count: filler) + [last]
        let payload = Array(major.utf8) + [0, 0, 0, 0] + brands.flatMap { Array($0.utf8) }
        let size = UInt32(8 + payload.count)
        return withUnsafeBytes(of: size.bigEndian) { Array($0) } + Array("ftyp".utf8) + payload
    }

    @Test func aLateAVIFBrandWaitsInsteadOfRefusing() {
        let body = Self.ftyp(major: "isom", filler: 12, last: "avif")  // "avif" at byte 64
        #expect(body.count > 64)
        for length in [16, 32, 48, 63] {
            #expect(ImageValidator.sniff(Array(body.prefix(length)), isComplete: false) == .needMoreBytes, "\(length)")
        }
        #expect(ImageValidator.sniff(body, isComplete: false) == .image(.avif))
        #expect(ImageValidator.sniff(body, isComplete: true) == .image(.avif))
    }

    @Test func brandsPastTheWindowNeverCount() {
        let body = Self.ftyp(major: "isom", filler: 70, last: "avif")  // "avif" at byte 296
        #expect(ImageValidator.sniff(Array(body.prefix(255)), isComplete: false) == .needMoreBytes)
        #expect(ImageValidator.sniff(Array(body.prefix(256)), isComplete: false) == .notImage)
        #expect(ImageValidator.sniff(body, isComplete: true) == .notImage)
    }
}
