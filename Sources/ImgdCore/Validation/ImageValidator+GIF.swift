extension ImageValidator {
    /// GIF: the logical screen descriptor after the signature gives the size; then the blocks
    /// are walked (extensions and frames, each a chain of sub-blocks) to the 0x3B trailer, and
    /// every frame's own size is held to the pixel limit: a decoder allocates a frame by its
    /// image descriptor, whatever the screen says.
    ///
    /// A byte that starts no block ends the walk, as it ends decoding in browsers (which then
    /// show what they have); such a file must still end with the trailer byte.
    func validateGIF(_ reader: inout ImageByteReader) throws -> ImageInfo {
        guard let screen = try reader.exactly(at: 6, count: 7) else {
            throw ImageValidationError.truncated(reason: "GIF ends inside its logical screen descriptor")
        }
        let width = Int(ImageByteOrder.littleEndian.decode(screen[0..<2]))
        let height = Int(ImageByteOrder.littleEndian.decode(screen[2..<4]))
        let info = try checkedInfo(.gif, width: width, height: height, name: "GIF")
        var offset = 13 + Self.gifColourTableSize(flags: screen[4])
        var frames = 0
        while true {
            guard let introducer = try reader.byte(at: offset) else {
                throw ImageValidationError.truncated(
                    reason: "GIF ends after \(frames) frames without its trailer byte (3B): the body ends early")
            }
            switch introducer {
            case 0x3B:
                return info
            case 0x21:
                // Extension: a label byte, then sub-blocks.
                offset = try Self.gifSkipSubBlocks(from: offset + 2, reader: &reader, what: "an extension")
            case 0x2C:
                // Image descriptor: left, top, width, height (2 bytes each), flags; then an
                // optional local colour table, the LZW minimum code size and the data sub-blocks.
                frames += 1
                guard let descriptor = try reader.exactly(at: offset + 1, count: 9) else {
                    throw ImageValidationError.truncated(reason: "GIF ends inside frame \(frames)'s image descriptor")
                }
                let frameWidth = Int(ImageByteOrder.littleEndian.decode(descriptor[4..<6]))
                let frameHeight = Int(ImageByteOrder.littleEndian.decode(descriptor[6..<8]))
                try checkPixelLimit(width: frameWidth, height: frameHeight)
                let data = offset + 10 + Self.gifColourTableSize(flags: descriptor[8]) + 1
                offset = try Self.gifSkipSubBlocks(from: data, reader: &reader, what: "frame \(frames)'s image data")
            default:
                guard try reader.byte(at: reader.count - 1) == 0x3B else {
                    throw ImageValidationError.truncated(
                        reason: "GIF does not end with its trailer byte (3B): the body ends early")
                }
                return info
            }
        }
    }

    /// The bytes of the colour table a screen or image descriptor's flags announce.
    private static func gifColourTableSize(flags: UInt8) -> Int {
        flags & 0x80 == 0 ? 0 : 3 << (Int(flags & 0x07) + 1)
    }

    /// The offset after the chain of sub-blocks starting at `offset` (each a length byte and
    /// that many bytes, ended by a zero length).
    private static func gifSkipSubBlocks(from offset: Int, reader: inout ImageByteReader, what: String) throws -> Int {
        var offset = offset
        while true {
            guard let length = try reader.byte(at: offset) else {
                throw ImageValidationError.truncated(reason: "GIF ends inside \(what): the body ends early")
            }
            offset += 1 + Int(length)
            if length == 0 { return offset }
        }
    }
}
