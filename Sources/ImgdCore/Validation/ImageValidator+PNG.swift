extension ImageValidator {
    /// The IEND chunk is always these 12 bytes: zero length, type, and the CRC of the type.
    private static let pngEnd: [UInt8] = [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]
    /// IHDR's length (13) and type, which must follow the signature.
    private static let pngHeaderStart: [UInt8] = [0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]

    /// PNG: IHDR right after the signature gives the size; a complete file ends with IEND.
    func validatePNG(_ reader: inout ImageByteReader) throws -> ImageInfo {
        // IHDR's length and type (8), width and height (8), five single-byte fields and the CRC (9).
        guard let header = try reader.exactly(at: 8, count: 25) else {
            throw ImageValidationError.truncated(reason: "PNG ends inside its IHDR chunk")
        }
        guard header[0..<8].elementsEqual(Self.pngHeaderStart) else {
            throw ImageValidationError.notImage(reason: "PNG does not start with an IHDR chunk")
        }
        let width = Int(ImageByteOrder.bigEndian.decode(header[8..<12]))
        let height = Int(ImageByteOrder.bigEndian.decode(header[12..<16]))
        // The PNG specification caps each dimension at 2^31 - 1.
        guard width <= Int(Int32.max), height <= Int(Int32.max) else {
            throw ImageValidationError.notImage(reason: "PNG declares a size of \(width)×\(height) pixels, beyond PNG's limit")
        }
        let info = try checkedInfo(.png, width: width, height: height, name: "PNG")
        // Nothing may follow IEND: bytes after it mean the body is not the file we think it is.
        guard let end = try reader.exactly(at: reader.count - 12, count: 12), end == Self.pngEnd else {
            throw ImageValidationError.truncated(reason: "PNG has no IEND chunk at its end: the body ends early")
        }
        return info
    }
}
