extension ImageValidator {
    /// WebP: a RIFF container whose first chunk (VP8, VP8L or VP8X) gives the size; the RIFF
    /// header's size says how long a complete file is.
    func validateWebP(_ reader: inout ImageByteReader) throws -> ImageInfo {
        guard let riffSize = try reader.uint(at: 4, size: 4, .littleEndian) else {
            throw ImageValidationError.truncated(reason: "WebP ends inside its RIFF header")
        }
        let declared = riffSize + 8  // the size counts everything after itself
        guard declared <= reader.count else {
            throw ImageValidationError.truncated(
                reason: "WebP's RIFF header declares \(declared) bytes but the body has \(reader.count): the body ends early")
        }
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
        return try checkedInfo(.webp, width: width, height: height, name: "WebP")
    }
}
