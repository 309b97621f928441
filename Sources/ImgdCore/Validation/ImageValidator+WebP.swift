extension ImageValidator {
    /// WebP: a RIFF container whose first chunk (VP8, VP8L or VP8X) gives the size; the RIFF
    /// header's size says how long a complete file is. The frames of an animation are held to
    /// the pixel limit too.
    func validateWebP(_ reader: inout ImageByteReader) throws -> ImageInfo {
        guard let riffSize = try reader.uint(at: 4, size: 4, .littleEndian) else {
            throw ImageValidationError.truncated(reason: "WebP ends inside its RIFF header")
        }
        let declared = riffSize + 8  // the size counts everything after itself
        guard let chunk = try reader.exactly(at: 12, count: 4) else {
            throw ImageValidationError.truncated(reason: "WebP ends before its first chunk")
        }
        let endsEarly = ImageValidationError.truncated(reason: "WebP ends inside its first chunk's header")
        let payload = 20  // after "RIFF", size, "WEBP", chunk type and chunk size
        let width: Int
        let height: Int
        switch ISOBMFFBox.fourCC(chunk) {
        case "VP8 ":
            // Lossy: a 3-byte frame tag, the start code 9D 01 2A, then 14-bit width and height
            // (the top two bits of each are a scaling hint).
            guard let frame = try reader.exactly(at: payload, count: 10) else { throw endsEarly }
            guard frame[3..<6].elementsEqual([0x9D, 0x01, 0x2A]) else {
                throw ImageValidationError.notImage(reason: "WebP's VP8 frame lacks its start code (9D 01 2A)")
            }
            width = Int(ImageByteOrder.littleEndian.decode(frame[6..<8]) & 0x3FFF)
            height = Int(ImageByteOrder.littleEndian.decode(frame[8..<10]) & 0x3FFF)
        case "VP8L":
            // Lossless: the signature byte 2F, then width - 1 and height - 1 in 14 bits each.
            guard let header = try reader.exactly(at: payload, count: 5) else { throw endsEarly }
            guard header[0] == 0x2F else {
                throw ImageValidationError.notImage(reason: "WebP's VP8L chunk lacks its signature byte (2F)")
            }
            let bits = ImageByteOrder.littleEndian.decode(header[1..<5])
            width = Int(bits & 0x3FFF) + 1
            height = Int((bits >> 14) & 0x3FFF) + 1
        case "VP8X":
            // Extended: flags (1), reserved (3), then canvas width - 1 and height - 1 in 24 bits each.
            guard let header = try reader.exactly(at: payload, count: 10) else { throw endsEarly }
            width = Int(ImageByteOrder.littleEndian.decode(header[4..<7])) + 1
            height = Int(ImageByteOrder.littleEndian.decode(header[7..<10])) + 1
        case let other:
            throw ImageValidationError.notImage(reason: "WebP's first chunk is '\(other)', not VP8, VP8L or VP8X")
        }
        // The pixel limit first: a bomb is refused as such even when its body is also short.
        let info = try checkedInfo(.webp, width: width, height: height, name: "WebP")
        try checkWebPFrames(&reader, end: min(declared, reader.count))
        guard declared <= reader.count else {
            throw ImageValidationError.truncated(
                reason: "WebP's RIFF header declares \(declared) bytes but the body has \(reader.count): the body ends early")
        }
        return info
    }

    /// Holds every animation frame (`ANMF` chunk) to the pixel limit: each declares its own
    /// size, which a decoder allocates. The walk reads one chunk header per chunk.
    private func checkWebPFrames(_ reader: inout ImageByteReader, end: Int) throws {
        var offset = 12
        while offset + 8 <= end, let header = try reader.exactly(at: offset, count: 8) {
            let size = Int(ImageByteOrder.littleEndian.decode(header[4..<8]))
            if ISOBMFFBox.fourCC(header[0..<4]) == "ANMF", size >= 12,
                let frame = try reader.exactly(at: offset + 8, count: 12)
            {
                // X and Y offsets (3 bytes each), then width - 1 and height - 1 (3 bytes each).
                try checkPixelLimit(
                    width: Int(ImageByteOrder.littleEndian.decode(frame[6..<9])) + 1,
                    height: Int(ImageByteOrder.littleEndian.decode(frame[9..<12])) + 1)
            }
            offset += 8 + size + (size & 1)  // chunks are padded to an even length
        }
    }
}
