extension ImageValidator {
    /// The bit depths BMP defines (2 is Windows CE's, 64 a later addition).
    private static let bmpBitDepths: Set = [1, 2, 4, 8, 16, 24, 32, 64]

    /// BMP: the DIB header after the 14-byte file header gives the size, the bit depth and the
    /// compression; a complete file holds the pixel data they describe from the pixel offset on.
    ///
    /// The file header's own size field (`bfSize`) is not trusted: writers get it wrong both
    /// ways (0, or larger than the file), and decoders ignore it too.
    func validateBMP(_ reader: inout ImageByteReader) throws -> ImageInfo {
        guard let fileHeader = try reader.exactly(at: 0, count: 18) else {
            throw ImageValidationError.truncated(reason: "BMP ends inside its file header")
        }
        let pixelOffset = Int(ImageByteOrder.littleEndian.decode(fileHeader[10..<14]))
        let headerSize = Int(ImageByteOrder.littleEndian.decode(fileHeader[14..<18]))
        let endsEarly = ImageValidationError.truncated(reason: "BMP ends inside its DIB header")
        let width: Int
        let height: Int
        let info: ImageInfo
        let bitDepth: Int
        // Compression 0 (BI_RGB) and 3/6 (bit fields) store rows as they are; the others
        // (RLE, JPEG, PNG) say how many bytes they take in `imageSize`.
        var compression = 0
        var imageSize = 0
        if headerSize == 12 {
            // OS/2 BITMAPCOREHEADER: unsigned 16-bit width and height, planes, bit depth.
            guard let core = try reader.exactly(at: 18, count: 8) else { throw endsEarly }
            width = Int(ImageByteOrder.littleEndian.decode(core[0..<2]))
            height = Int(ImageByteOrder.littleEndian.decode(core[2..<4]))
            info = try checkedInfo(.bmp, width: width, height: height, name: "BMP")
            bitDepth = Int(ImageByteOrder.littleEndian.decode(core[6..<8]))
        } else if ImageSignature.isPlausibleDIBHeaderSize(headerSize) {
            // BITMAPINFOHEADER and later: signed 32-bit; a negative height means rows run top-down.
            guard let size = try reader.exactly(at: 18, count: 8) else { throw endsEarly }
            width = Int(Int32(truncatingIfNeeded: ImageByteOrder.littleEndian.decode(size[0..<4])))
            height = Int(Int32(truncatingIfNeeded: ImageByteOrder.littleEndian.decode(size[4..<8])).magnitude)
            // The pixel limit before the rest of the header: a bomb is refused as such even cut short.
            info = try checkedInfo(.bmp, width: width, height: height, name: "BMP")
            guard let rest = try reader.exactly(at: 26, count: 12) else { throw endsEarly }
            bitDepth = Int(ImageByteOrder.littleEndian.decode(rest[2..<4]))
            compression = Int(ImageByteOrder.littleEndian.decode(rest[4..<8]))
            imageSize = Int(ImageByteOrder.littleEndian.decode(rest[8..<12]))
        } else {
            throw ImageValidationError.notImage(reason: "BMP has an unknown DIB header size of \(headerSize) bytes")
        }
        guard pixelOffset <= reader.count else {
            throw ImageValidationError.truncated(
                reason: "BMP's pixel data starts at offset \(pixelOffset), past the end of the body (\(reader.count) bytes)")
        }
        // OS/2 2.x headers (64 bytes) use 3 and 4 for Huffman and RLE24, not bit fields.
        let storesRows = compression == 0 || compression == 6 || (compression == 3 && headerSize != 64)
        let pixelBytes: Int
        if storesRows {
            guard Self.bmpBitDepths.contains(bitDepth) else {
                throw ImageValidationError.corrupt(reason: "BMP declares \(bitDepth) bits per pixel, which BMP does not define")
            }
            // Rows are padded to 4 bytes; the last row's padding may be missing (some writers
            // drop it, and decoders do not need it).
            let rowBits = width.multipliedReportingOverflow(by: bitDepth)
            guard !rowBits.overflow else { throw Self.bmpShort(needs: Int.max, reader.count) }
            let rowBytes = (rowBits.partialValue + 31) / 32 * 4
            let (rows, overflow) = rowBytes.multipliedReportingOverflow(by: height - 1)
            guard !overflow else { throw Self.bmpShort(needs: Int.max, reader.count) }
            pixelBytes = rows + (rowBits.partialValue + 7) / 8
        } else {
            // RLE, JPEG and PNG data say their length in biSizeImage; 0 leaves it unknown.
            pixelBytes = imageSize
        }
        guard pixelBytes <= reader.count - pixelOffset else {
            throw Self.bmpShort(needs: pixelBytes, from: pixelOffset, reader.count)
        }
        return info
    }

    private static func bmpShort(needs bytes: Int, from offset: Int = 0, _ count: Int) -> ImageValidationError {
        .truncated(
            reason: "BMP's header describes \(bytes) bytes of pixel data from offset \(offset), "
                + "but the body has \(count) bytes: the body ends early")
    }
}
