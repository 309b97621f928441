extension ImageValidator {
    /// IHDR's length (13) and type, which must follow the signature.
    private static let pngHeaderStart: [UInt8] = [0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]
    /// How much of the body one step of the chunk walk reads: the walk holds no more than this.
    static let pngPieceSize = 256 * 1024
    /// The bit depths each colour type allows (PNG specification, table 11.1).
    private static let pngBitDepths: [UInt8: Set<UInt8>] = [
        0: [1, 2, 4, 8, 16],  // greyscale
        2: [8, 16],  // truecolour
        3: [1, 2, 4, 8],  // indexed
        4: [8, 16],  // greyscale with alpha
        6: [8, 16],  // truecolour with alpha
    ]

    /// PNG: IHDR right after the signature gives the size; then every chunk up to IEND is
    /// walked, its CRC-32 checked, in one front-to-back pass (`PNGChunkStream`).
    ///
    /// A chunk running past the end of the body is `truncated`; a CRC mismatch, an impossible
    /// IHDR, a missing IDAT, an ancillary chunk too short for its type (or a palette, tRNS or
    /// hIST that does not fit the palette, a text chunk without its keyword) and a broken
    /// APNG frame sequence are `corrupt`. Bytes after IEND are allowed: they are common in
    /// the wild and every decoder ignores them.
    ///
    /// `walked`, when it saw every byte of a body of this size, is the walk already made (as the
    /// body arrived): its verdict is taken instead of reading the body again.
    func validatePNG(_ reader: inout ImageByteReader, walked: PNGArrivalWalk? = nil) throws -> ImageInfo {
        // IHDR's length and type (8), width and height (8), five single-byte fields and the CRC (9).
        guard let header = try reader.exactly(at: 8, count: 25) else {
            throw ImageValidationError.truncated(reason: "PNG ends inside its IHDR chunk")
        }
        guard header[0..<8].elementsEqual(Self.pngHeaderStart) else {
            throw ImageValidationError.notImage(reason: "PNG does not start with an IHDR chunk")
        }
        let width = Int(ImageByteOrder.bigEndian.decode(header[8..<12]))
        let height = Int(ImageByteOrder.bigEndian.decode(header[12..<16]))
        // The pixel limit first: a bomb is refused as such, whatever else is wrong with it.
        let info = try checkedInfo(.png, width: width, height: height, name: "PNG")
        // The PNG specification caps each dimension at 2^31 - 1.
        guard width <= Int(Int32.max), height <= Int(Int32.max) else {
            throw ImageValidationError.notImage(reason: "PNG declares a size of \(width)×\(height) pixels, beyond PNG's limit")
        }
        let bitDepth = header[16]
        let colourType = header[17]
        guard let depths = Self.pngBitDepths[colourType], depths.contains(bitDepth) else {
            throw ImageValidationError.corrupt(
                reason: "PNG's IHDR pairs colour type \(colourType) with bit depth \(bitDepth), which PNG does not allow")
        }
        // Compression and filter method 0 are the only ones defined; interlace is 0 or 1.
        guard header[18] == 0, header[19] == 0, header[20] <= 1 else {
            throw ImageValidationError.corrupt(
                reason: "PNG's IHDR has compression method \(header[18]), filter method \(header[19]) "
                    + "and interlace method \(header[20]); PNG defines 0, 0 and 0 or 1")
        }

        if let walked, walked.covers(reader.count) {
            try walked.verdict()
            return info
        }
        var stream = PNGChunkStream(bodyCount: reader.count, start: 8, colourType: colourType, width: width, height: height)
        while !stream.isFinished, stream.position < reader.count {
            let start = stream.position
            try reader.withBytes(at: start, count: Self.pngPieceSize) { try stream.feed($0) }
            // Each piece moves the walk on (it is never empty while bytes remain); the guard
            // keeps a mistake there from becoming an endless loop.
            guard stream.isFinished || stream.position > start else { break }
        }
        guard stream.isFinished else { throw stream.endedEarly }
        return info
    }
}
