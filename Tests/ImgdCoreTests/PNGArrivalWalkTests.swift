import ImgdTestSupport
import Testing

@testable import ImgdCore

/// A PNG's chunk walk made as its body arrives (``PNGArrivalWalk``): validation takes its verdict
/// instead of reading the body again, and that verdict, message included, is the one a read of
/// the whole body gives, for every way a PNG can be damaged and every size of piece.
@Suite(.offThePool) struct PNGArrivalWalkTests {
    private let validator = ImageValidator()

    /// The walk of `body` fed in pieces of `pieceSize` bytes, made for a body of `declared` bytes.
    private func walk(_ body: [UInt8], pieceSize: Int, declared: Int? = nil) -> PNGArrivalWalk? {
        body.withUnsafeBytes { PNGArrivalWalk.walking($0, pieceSize: pieceSize, declaredCount: declared) }
    }

    private func outcome(_ validate: () throws -> ImageInfo) -> String {
        do {
            return "valid \(try validate())"
        } catch {
            return "refused: \(error)"
        }
    }

    /// Large PNGs as a spill sees them: valid, a bit flipped in each kind of chunk, a CRC
    /// damaged, cut before IEND, a chunk running past the end, bytes after IEND.
    private static var bodies: [(String, [UInt8])] {
        let png = TestImages.png(bytes: 300_000, width: 32, height: 32)
        let padding = ImageFixture.pngChunkOffset(png, "pADd")
        let end = ImageFixture.pngChunkOffset(png, "IEND")
        var flippedData = png
        flippedData[padding + 8 + 150_000] ^= 0x10
        var flippedImageData = png
        flippedImageData[ImageFixture.pngChunkOffset(png, "IDAT") + 8 + 40] ^= 0x01
        var damagedEndCRC = png
        damagedEndCRC[end + 8] ^= 0x01
        var longChunk = png
        longChunk[padding + 1] &+= 1  // pADd declares 65,536 bytes more than the body holds
        var badType = png
        badType[padding + 4] = 0x31  // "1ADd": not four letters
        return [
            ("valid", png),
            ("a bit flipped deep in an ancillary chunk", flippedData),
            ("a bit flipped in the image data", flippedImageData),
            ("IEND's CRC damaged", damagedEndCRC),
            ("cut before IEND", Array(png[..<end])),
            ("a chunk running past the end", longChunk),
            ("a chunk type that is no word", badType),
            ("bytes after IEND", png + [0x0A] + [UInt8](repeating: 7, count: 70_000)),
        ]
    }

    @Test("the walk's verdict is the read-back's, message included, whatever the pieces' size", arguments: [1, 7, 4096, 65_536, 300_000])
    func sameVerdictAsAReadBack(pieceSize: Int) throws {
        for (label, body) in Self.bodies {
            let readBack = outcome { try validator.validate(MemoryByteSource(body)) }
            let walked = walk(body, pieceSize: pieceSize)
            #expect(walked != nil, "\(label)")
            let fromWalk = outcome { try validator.validate(MemoryByteSource(body), walked: walked) }
            #expect(fromWalk == readBack, "\(label), pieces of \(pieceSize)")
        }
        // The valid body is valid, and each damaged one refused: the comparison is not of two
        // walks that both fail to look.
        let verdicts = Self.bodies.map { label, body in (label, outcome { try validator.validate(MemoryByteSource(body)) }) }
        #expect(verdicts.filter { $0.1.hasPrefix("valid") }.map(\.0) == ["valid", "bytes after IEND"])
    }

    @Test("with a whole walk, validation reads only the head and the last byte of the body")
    func walkedValidationReadsLittle() throws {
        let png = TestImages.png(bytes: 2_000_000, width: 64, height: 64)
        let counting = CountingByteSource(png)
        _ = try validator.validate(counting, walked: walk(png, pieceSize: 65_536))
        #expect(counting.bytesRead < 3 * ImageByteReader.windowSize, "\(counting.bytesRead) bytes read")

        let readBack = CountingByteSource(png)
        _ = try validator.validate(readBack)
        #expect(readBack.bytesRead >= png.count - 8)
    }

    @Test("a walk that does not stand for the whole body is not used: the body is read (and judged) as it is")
    func partialWalkIsNotUsed() throws {
        let png = TestImages.png(bytes: 300_000, width: 32, height: 32)
        // Made for a declared size the body did not get (the response said more): the file, a
        // valid PNG of its own size, is read and found valid.
        let declaredMore = walk(png, pieceSize: 65_536, declared: png.count + 100)
        #expect(outcome { try validator.validate(MemoryByteSource(png), walked: declaredMore) }.hasPrefix("valid"))
        // Fed only part of the body: not used either.
        let half = png.withUnsafeBytes { all -> PNGArrivalWalk? in
            guard var walk = PNGArrivalWalk(head: UnsafeRawBufferPointer(rebasing: all.prefix(65_536)), bodyCount: all.count)
            else { return nil }
            walk.feed(UnsafeRawBufferPointer(rebasing: all.prefix(150_000)))
            return walk
        }
        let counting = CountingByteSource(png)
        #expect(outcome { try validator.validate(counting, walked: half) }.hasPrefix("valid"))
        #expect(counting.bytesRead >= png.count - 8)
    }

    @Test("no walk for a body that is not a PNG, or whose head is too short to hold IHDR")
    func onlyForPNGs() {
        let jpeg = TestImages.jpeg(width: 8, height: 8, scanBytes: 100_000)
        #expect(jpeg.withUnsafeBytes { PNGArrivalWalk(head: $0, bodyCount: jpeg.count) } == nil)
        let png = TestImages.png(width: 8, height: 8)
        #expect(png.withUnsafeBytes { PNGArrivalWalk(head: UnsafeRawBufferPointer(rebasing: $0.prefix(32)), bodyCount: png.count) } == nil)
        #expect(png.withUnsafeBytes { PNGArrivalWalk(head: UnsafeRawBufferPointer(rebasing: $0.prefix(33)), bodyCount: png.count) } != nil)
    }
}
