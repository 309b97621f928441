extension ImageValidator {
    /// How many padding bytes (0x00 or whitespace) may follow EOI; some servers and tools append them.
    static let jpegMaximumPadding = 64

    /// JPEG: walks the marker segments after SOI to the first frame header (SOFn) for the size;
    /// a complete file ends with EOI.
    func validateJPEG(_ reader: inout ImageByteReader) throws -> ImageInfo {
        let (width, height) = try Self.jpegFrameSize(&reader)
        let info = try checkedInfo(.jpeg, width: width, height: height, name: "JPEG frame header")
        let tailLength = min(reader.count, Self.jpegMaximumPadding + 2)
        let tail = try reader.bytes(at: reader.count - tailLength, count: tailLength)
        var end = tail.count
        while end > 0, tail.count - end < Self.jpegMaximumPadding, [0x00, 0x20, 0x09, 0x0A, 0x0D].contains(tail[end - 1]) {
            end -= 1
        }
        guard end >= 2, tail[end - 2] == 0xFF, tail[end - 1] == 0xD9 else {
            throw ImageValidationError.truncated(reason: "JPEG does not end with an EOI marker (FF D9): the body ends early")
        }
        return info
    }

    /// Width and height from the first SOF0–SOF15 segment (DHT C4, JPG C8 and DAC CC share the range but are not frames).
    private static func jpegFrameSize(_ reader: inout ImageByteReader) throws -> (width: Int, height: Int) {
        let endsEarly = ImageValidationError.truncated(reason: "JPEG ends before its frame header (SOF)")
        var offset = 2  // after SOI
        while true {
            // Find the next marker. libjpeg skips stray bytes between segments and extra FF fill
            // bytes before a marker code, so a JPEG that decodes elsewhere passes here too.
            guard var byte = try reader.byte(at: offset) else { throw endsEarly }
            while byte != 0xFF {
                offset += 1
                guard let next = try reader.byte(at: offset) else { throw endsEarly }
                byte = next
            }
            while byte == 0xFF {
                offset += 1
                guard let next = try reader.byte(at: offset) else { throw endsEarly }
                byte = next
            }
            let marker = byte
            offset += 1
            switch marker {
            case 0x00, 0x01, 0xD0...0xD8:
                continue  // a stuffed zero, TEM, RSTn, SOI: no length field follows
            case 0xD9:
                throw ImageValidationError.notImage(reason: "JPEG reaches its end marker (EOI) before any frame header")
            case 0xDA:
                throw ImageValidationError.notImage(reason: "JPEG scan data starts before any frame header")
            case 0xC0...0xCF where marker != 0xC4 && marker != 0xC8 && marker != 0xCC:
                // Length (2), sample precision (1), number of lines (2), samples per line (2).
                guard let frame = try reader.exactly(at: offset, count: 7) else { throw endsEarly }
                let height = Int(ImageByteOrder.bigEndian.decode(frame[3..<5]))
                let width = Int(ImageByteOrder.bigEndian.decode(frame[5..<7]))
                return (width, height)
            default:
                guard let length = try reader.uint(at: offset, size: 2, .bigEndian) else { throw endsEarly }
                guard length >= 2 else {
                    throw ImageValidationError.notImage(
                        reason: "JPEG segment FF \(ImageSignature.hex(marker)) at offset \(offset - 2) "
                            + "has an impossible length of \(length)")
                }
                offset += length
            }
        }
    }
}
