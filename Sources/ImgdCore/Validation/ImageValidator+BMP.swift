extension ImageValidator {
    /// The bit depths BMP defines (2 is Windows CE's, 64 a later addition).
    private static let bmpBitDepths: Set = [1, 2, 4, 8, 16, 24, 32, 64]

    /// BMP: the DIB header after the 14-byte file header gives the size, the bit depth and the
    /// compression; a complete file holds, in order, the header, the bit masks (BI_BITFIELDS
    /// after a 40-byte header), the palette (bit depths up to 8: `biClrUsed` entries, or
    /// 2^depth when 0, never more) and, from the pixel offset on, the pixel data they
    /// describe to its last byte: uncompressed rows padded to 4 bytes each, the last one too.
    ///
    /// The file header's own size field (`bfSize`) is not trusted: writers get it wrong both
    /// ways (0, or larger than the file), and decoders ignore it too. A pixel offset of 0 means
    /// "right after the palette", as Pillow and browsers read it.
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
        var coloursUsed = 0
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
            // Planes, bit depth, compression, image size, resolution (8 bytes), colours used.
            guard let rest = try reader.exactly(at: 26, count: 24) else { throw endsEarly }
            bitDepth = Int(ImageByteOrder.littleEndian.decode(rest[2..<4]))
            compression = Int(ImageByteOrder.littleEndian.decode(rest[4..<8]))
            imageSize = Int(ImageByteOrder.littleEndian.decode(rest[8..<12]))
            coloursUsed = Int(ImageByteOrder.littleEndian.decode(rest[20..<24]))
        } else {
            throw ImageValidationError.notImage(reason: "BMP has an unknown DIB header size of \(headerSize) bytes")
        }
        // OS/2 2.x headers (64 bytes) use 3 and 4 for Huffman and RLE24, not bit fields.
        let hasBitFields = (compression == 3 && headerSize != 64) || compression == 6
        let storesRows = compression == 0 || hasBitFields
        if storesRows {
            guard Self.bmpBitDepths.contains(bitDepth) else {
                throw ImageValidationError.corrupt(reason: "BMP declares \(bitDepth) bits per pixel, which BMP does not define")
            }
        }
        let dataStart = try Self.bmpPixelDataStart(
            pixelOffset: pixelOffset, headerSize: headerSize, bitDepth: bitDepth, coloursUsed: coloursUsed,
            maskBytes: headerSize == 40 && hasBitFields ? (compression == 6 ? 16 : 12) : 0)
        guard dataStart <= reader.count else {
            throw ImageValidationError.truncated(
                reason: "BMP's pixel data starts at offset \(dataStart), past the end of the body (\(reader.count) bytes)")
        }
        let pixelBytes: Int
        if storesRows {
            // Every row, the last one included, is padded to a multiple of 4 bytes.
            let rowBits = width.multipliedReportingOverflow(by: bitDepth)
            guard !rowBits.overflow else { throw Self.bmpShort(needs: Int.max, reader.count) }
            let rowBytes = (rowBits.partialValue + 31) / 32 * 4
            let (rows, overflow) = rowBytes.multipliedReportingOverflow(by: height)
            guard !overflow else { throw Self.bmpShort(needs: Int.max, reader.count) }
            pixelBytes = rows
        } else {
            // RLE, JPEG and PNG data say their length in biSizeImage; 0 leaves it unknown.
            pixelBytes = imageSize
        }
        guard pixelBytes <= reader.count - dataStart else {
            throw Self.bmpShort(needs: pixelBytes, from: dataStart, reader.count)
        }
        return info
    }

    /// Where the pixel data starts, after checking that the header, the bit masks and the
    /// palette come before it.
    ///
    /// The palette is judged only where its size is stated (`biClrUsed`, headers of 40 bytes and
    /// more): an OS/2 1.x palette has no count, and files in the wild hold fewer than its
    /// 2^depth entries, which decoders find the end of from the pixel offset.
    private static func bmpPixelDataStart(
        pixelOffset: Int, headerSize: Int, bitDepth: Int, coloursUsed: Int, maskBytes: Int
    ) throws -> Int {
        var tableEnd = 14 + headerSize + maskBytes
        var palette = ""
        if (1...8).contains(bitDepth) {
            let most = 1 << bitDepth
            if headerSize == 12 {
                if pixelOffset == 0 { tableEnd += 3 * most }
            } else {
                guard coloursUsed <= most else {
                    throw ImageValidationError.corrupt(
                        reason: "BMP's palette has \(coloursUsed) colours, more than \(bitDepth) bits per pixel can index (\(most))")
                }
                let colours = coloursUsed == 0 ? most : coloursUsed
                tableEnd += 4 * colours
                palette = " and its \(colours)-colour palette"
            }
        }
        guard pixelOffset != 0 else { return tableEnd }
        guard pixelOffset >= tableEnd else {
            let masks = maskBytes > 0 ? ", its bit masks" : ""
            throw ImageValidationError.corrupt(
                reason: "BMP's pixel data starts at offset \(pixelOffset), inside its headers\(masks)\(palette), "
                    + "which end at offset \(tableEnd)")
        }
        return pixelOffset
    }

    private static func bmpShort(needs bytes: Int, from offset: Int = 0, _ count: Int) -> ImageValidationError {
        .truncated(
            reason: "BMP's header describes \(bytes) bytes of pixel data from offset \(offset), "
                + "but the body has \(count) bytes: the body ends early")
    }
}
