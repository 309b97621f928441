/// A PNG's chunks, checked as their bytes go by: each chunk's length against the body, its
/// type, its CRC-32 (over type and data), the order rules every decoder enforces, and, once the
/// CRC matched, what `PNGChunkRules` and `APNGAnimation` require of its data.
///
/// It is fed the body after the signature in pieces of any size, front to back, so the whole
/// body is read once in bounded memory and a body in memory is never copied (only the first
/// `PNGChunk.headLimit` data bytes of the few chunk types with rules are kept). It stops at
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
    /// The chunk being read.
    private var chunk = PNGChunk(type: 0, length: 0, offset: 0)
    /// Whether the chunk's data head is kept for the rules.
    private var keepsHead = false
    /// The chunk's CRC so far.
    private var crc = CRC32()
    private var chunkCount = 0
    /// The PLTE chunk's entries, once it has been read.
    private var paletteEntries: Int?
    private var sawImageData = false
    private var animation: APNGAnimation

    /// - Parameters:
    ///   - bodyCount: the body's size, so a chunk that runs past it is caught at its header.
    ///   - start: where the first chunk starts (8, after the signature).
    ///   - colourType: IHDR's colour type, for the PLTE rule and the lengths that depend on it.
    ///   - width, height: IHDR's size, the canvas every APNG frame must lie in.
    init(bodyCount: Int, start: Int, colourType: UInt8, width: Int, height: Int) {
        self.bodyCount = bodyCount
        self.colourType = colourType
        position = start
        animation = APNGAnimation(canvasWidth: width, canvasHeight: height)
    }

    /// True once IEND has been read and its CRC checked.
    var isFinished: Bool {
        if case .end = phase { true } else { false }
    }

    /// Checks the next bytes of the body; stops early (consuming less) once IEND is done.
    ///
    /// - Throws: `.corrupt` for a CRC mismatch, a chunk type that is not four letters, a
    ///   broken order rule, or chunk data its type's rules refuse (`PNGChunkRules`,
    ///   `APNGAnimation`); `.truncated` for a chunk whose declared length runs past the body.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) throws {
        var index = 0
        while index < bytes.count {
            switch phase {
            case .header:
                index += gather(bytes, from: index, upTo: 8)
                if partialCount == 8 { try startChunk() }
            case .data(let remaining):
                let length = min(remaining, bytes.count - index)
                let piece = UnsafeRawBufferPointer(rebasing: bytes[index..<index + length])
                crc.add(piece)
                if keepsHead { keep(piece, at: chunk.length - remaining) }
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

    /// Keeps what the rules read of a data piece that starts at data offset `offset`.
    private mutating func keep(_ piece: UnsafeRawBufferPointer, at offset: Int) {
        let wanted = max(0, min(piece.count, PNGChunk.headLimit - offset))
        chunk.head.append(contentsOf: piece.prefix(wanted))
        if chunk.type == PNGChunk.internationalText {
            chunk.laterNULs += piece.dropFirst(wanted).lazy.filter { $0 == 0 }.count
        }
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
        chunk = PNGChunk(type: UInt32(truncatingIfNeeded: partial), length: Int(partial >> 32), offset: position - 8)
        partial = 0
        partialCount = 0
        let name = chunk.name
        guard withUnsafeBytes(of: chunk.type.bigEndian, { $0.allSatisfy(Self.isLetter) }) else {
            throw ImageValidationError.corrupt(
                reason: "PNG chunk \(chunkCount + 1) at offset \(chunk.offset) has type bytes \(name), not four letters")
        }
        // Data and CRC must fit in the body; checked here so a chunk declaring 4 GB costs nothing.
        guard chunk.length + 4 <= bodyCount - position else {
            throw ImageValidationError.truncated(
                reason: "PNG's '\(name)' chunk at offset \(chunk.offset) declares \(chunk.length) bytes of data "
                    + "but only \(max(0, bodyCount - position - 4)) remain: the body ends early")
        }
        if chunkCount == 0, chunk.type != PNGChunk.header {
            throw ImageValidationError.notImage(reason: "PNG does not start with an IHDR chunk")
        }
        keepsHead = PNGChunkRules.inspected.contains(chunk.type)
        crc = CRC32()
        withUnsafeBytes(of: chunk.type.bigEndian) { crc.add($0) }
        phase = chunk.length == 0 ? .checksum : .data(remaining: chunk.length)
    }

    private mutating func endChunk() throws {
        let stored = UInt32(truncatingIfNeeded: partial)
        partial = 0
        partialCount = 0
        guard stored == crc.value else {
            throw ImageValidationError.corrupt(
                reason: "PNG's '\(chunk.name)' chunk at offset \(chunk.offset) fails its CRC-32 check (stored "
                    + "\(Self.hex(stored)), computed \(Self.hex(crc.value))): the bytes are damaged")
        }
        chunkCount += 1
        // The bytes are as written (the CRC matched): now what they say.
        if keepsHead {
            try PNGChunkRules.check(chunk, colourType: colourType, paletteEntries: paletteEntries)
            try animation.check(chunk, afterImageData: sawImageData)
        }
        switch chunk.type {
        case PNGChunk.palette:
            paletteEntries = chunk.length / 3
        case PNGChunk.imageData:
            if !sawImageData, colourType == Self.paletteColourType, paletteEntries == nil {
                throw ImageValidationError.corrupt(
                    reason: "PNG with colour type 3 (palette) has no PLTE chunk before its image data")
            }
            sawImageData = true
        case PNGChunk.end:
            guard sawImageData else {
                throw ImageValidationError.corrupt(reason: "PNG has no IDAT chunk: it holds no image data")
            }
            try animation.finish()
            phase = .end
            return
        default:
            break
        }
        phase = .header
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    private static func hex(_ value: UInt32) -> String {
        withUnsafeBytes(of: value.bigEndian) { $0.map(ImageSignature.hex).joined() }
    }
}
