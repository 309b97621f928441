extension ImageValidator {
    /// BMP: the DIB header after the 14-byte file header gives the size; the file header's size
    /// field says how long a complete file is.
    func validateBMP(_ reader: inout ImageByteReader) throws -> ImageInfo {
        guard let fileHeader = try reader.exactly(at: 0, count: 18) else {
            throw ImageValidationError.truncated(reason: "BMP ends inside its file header")
        }
        let fileSize = Int(ImageByteOrder.littleEndian.decode(fileHeader[2..<6]))
        let pixelOffset = Int(ImageByteOrder.littleEndian.decode(fileHeader[10..<14]))
        let headerSize = Int(ImageByteOrder.littleEndian.decode(fileHeader[14..<18]))
        // Some writers leave the size field 0; only a size larger than the body proves it short.
        guard fileSize <= reader.count else {
            throw ImageValidationError.truncated(
                reason: "BMP's header declares \(fileSize) bytes but the body has \(reader.count): the body ends early")
        }
        guard pixelOffset <= reader.count else {
            throw ImageValidationError.truncated(
                reason: "BMP's pixel data starts at offset \(pixelOffset), past the end of the body")
        }
        let endsEarly = ImageValidationError.truncated(reason: "BMP ends inside its DIB header")
        let width: Int
        let height: Int
        if headerSize == 12 {
            // OS/2 BITMAPCOREHEADER: unsigned 16-bit width and height.
            guard let size = try reader.exactly(at: 18, count: 4) else { throw endsEarly }
            width = Int(ImageByteOrder.littleEndian.decode(size[0..<2]))
            height = Int(ImageByteOrder.littleEndian.decode(size[2..<4]))
        } else if ImageSignature.isPlausibleDIBHeaderSize(headerSize) {
            // BITMAPINFOHEADER and later: signed 32-bit; a negative height means rows run top-down.
            guard let size = try reader.exactly(at: 18, count: 8) else { throw endsEarly }
            width = Int(Int32(truncatingIfNeeded: ImageByteOrder.littleEndian.decode(size[0..<4])))
            height = Int(Int32(truncatingIfNeeded: ImageByteOrder.littleEndian.decode(size[4..<8])).magnitude)
        } else {
            throw ImageValidationError.notImage(reason: "BMP has an unknown DIB header size of \(headerSize) bytes")
        }
        return try checkedInfo(.bmp, width: width, height: height, name: "BMP")
    }
}
