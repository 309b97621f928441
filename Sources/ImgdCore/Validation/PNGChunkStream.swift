/// A PNG's chunks, checked as their bytes go by: each chunk's length against the body, its
/// type, its CRC-32 (over type and data), and the order rules every decoder enforces.
///
/// It is fed the body after the signature in pieces of any size, front to back, so the whole
/// body is read once in bounded memory and a body in memory is never copied. It stops at
/// IEND: bytes after it (common in the wild: a trailing newline, an appended archive) are not
/// its business.
struct PNGChunkStream {
    /// The palette colour type (3), which needs a PLTE chunk before its image data.
    static let paletteColourType: UInt8 = 3

    private enum Phase {
        /// Collecting a chunk's length and type (8 bytes).
        case header
        /// CRC-ing the data: `remaining` bytes to go.
        case data(remaining: Int)
        /// Collecting the stored CRC (4 bytes).
        case checksum
        /// IEND's CRC matched.
        case end
    }

    private let bodyCount: Int
    private let colourType: UInt8
    /// The body offset of the next byte fed.
    private(set) var position: Int
    private var phase = Phase.header
    /// Header or CRC bytes gathered so far (at most 8), big-endian in the low bits.
    private var partial: UInt64 = 0
    private var partialCount = 0
    /// The chunk being read: where it starts, its type, its length, and its CRC so far.
    private var chunkStart = 0
    private var chunkType: UInt32 = 0
    private var chunkLength = 0
    private var crc = CRC32()
    private var chunkCount = 0
    private var sawPalette = false
    private var sawImageData = false

    /// - Parameters:
    ///   - bodyCount: the body's size, so a chunk that runs past it is caught at its header.
    ///   - start: where the first chunk starts (8, after the signature).
    ///   - colourType: IHDR's colour type, for the PLTE rule.
    init(bodyCount: Int, start: Int, colourType: UInt8) {
        self.bodyCount = bodyCount
        self.colourType = colourType
        position = start
    }

    /// True once IEND has been read and its CRC checked.
    var isFinished: Bool {
        if case .end = phase { true } else { false }
    }

    /// Checks the next bytes of the body; stops early (consuming less) once IEND is done.
    ///
    /// - Throws: `.corrupt` for a CRC mismatch, a chunk type that is not four letters, or a
    ///   broken order rule; `.truncated` for a chunk whose declared length runs past the body.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) throws {
        var index = 0
        while index < bytes.count {
            switch phase {
            case .header:
                index += gather(bytes, from: index, upTo: 8)
                if partialCount == 8 { try startChunk() }
            case .data(let remaining):
                let length = min(remaining, bytes.count - index)
                crc.add(UnsafeRawBufferPointer(rebasing: bytes[index..<index + length]))
                index += length
                position += length
                phase = remaining == length ? .checksum : .data(remaining: remaining - length)
            case .checksum:
                index += gather(bytes, from: index, upTo: 4)
                if partialCount == 4 { try endChunk() }
            case .end:
                return
            }
        }
    }

    /// The error for a body that ended before IEND (only possible at a chunk boundary or
    /// inside a chunk header: a chunk that runs past the end is caught at its header).
    var endedEarly: ImageValidationError {
        .truncated(reason: "PNG ends after \(chunkCount) chunks without an IEND chunk: the body ends early")
    }

    /// Moves up to `wanted - partialCount` bytes into `partial`; returns how many.
    private mutating func gather(_ bytes: UnsafeRawBufferPointer, from index: Int, upTo wanted: Int) -> Int {
        let taken = min(wanted - partialCount, bytes.count - index)
        for byte in bytes[index..<index + taken] { partial = partial << 8 | UInt64(byte) }
        partialCount += taken
        position += taken
        return taken
    }

    private mutating func startChunk() throws {
        chunkStart = position - 8
        chunkLength = Int(partial >> 32)
        chunkType = UInt32(truncatingIfNeeded: partial)
        partial = 0
        partialCount = 0
        let name = Self.name(chunkType)
        guard withUnsafeBytes(of: chunkType.bigEndian, { $0.allSatisfy(Self.isLetter) }) else {
            throw ImageValidationError.corrupt(
                reason: "PNG chunk \(chunkCount + 1) at offset \(chunkStart) has type bytes \(name), not four letters")
        }
        // Data and CRC must fit in the body; checked here so a chunk declaring 4 GB costs nothing.
        guard chunkLength + 4 <= bodyCount - position else {
            throw ImageValidationError.truncated(
                reason: "PNG's '\(name)' chunk at offset \(chunkStart) declares \(chunkLength) bytes of data "
                    + "but only \(max(0, bodyCount - position - 4)) remain: the body ends early")
        }
        if chunkCount == 0, chunkType != Self.header {
            throw ImageValidationError.notImage(reason: "PNG does not start with an IHDR chunk")
        }
        crc = CRC32()
        withUnsafeBytes(of: chunkType.bigEndian) { crc.add($0) }
        phase = chunkLength == 0 ? .checksum : .data(remaining: chunkLength)
    }

    private mutating func endChunk() throws {
        let stored = UInt32(truncatingIfNeeded: partial)
        partial = 0
        partialCount = 0
        let name = Self.name(chunkType)
        guard stored == crc.value else {
            throw ImageValidationError.corrupt(
                reason: "PNG's '\(name)' chunk at offset \(chunkStart) fails its CRC-32 check (stored "
                    + "\(Self.hex(stored)), computed \(Self.hex(crc.value))): the bytes are damaged")
        }
        chunkCount += 1
        switch chunkType {
        case Self.palette:
            sawPalette = true
        case Self.imageData:
            if !sawImageData, colourType == Self.paletteColourType, !sawPalette {
                throw ImageValidationError.corrupt(
                    reason: "PNG with colour type 3 (palette) has no PLTE chunk before its image data")
            }
            sawImageData = true
        case Self.end:
            guard sawImageData else {
                throw ImageValidationError.corrupt(reason: "PNG has no IDAT chunk: it holds no image data")
            }
            phase = .end
            return
        default:
            break
        }
        phase = .header
    }

    private static let header = type("IHDR")
    private static let palette = type("PLTE")
    private static let imageData = type("IDAT")
    private static let end = type("IEND")

    private static func isLetter(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    private static func type(_ name: StaticString) -> UInt32 {
        name.withUTF8Buffer { UInt32(ImageByteOrder.bigEndian.decode($0)) }
    }

    /// The type as text, or its bytes in hex when they are not printable.
    private static func name(_ type: UInt32) -> String {
        withUnsafeBytes(of: type.bigEndian) { bytes in
            bytes.allSatisfy { (0x21...0x7E).contains($0) }
                ? String(decoding: bytes, as: UTF8.self)
                : bytes.map(ImageSignature.hex).joined(separator: " ")
        }
    }

    private static func hex(_ value: UInt32) -> String {
        withUnsafeBytes(of: value.bigEndian) { $0.map(ImageSignature.hex).joined() }
    }
}
