extension ImageValidator {
    /// Directory entries checked; icons hold a handful of images, and the cap keeps a forged
    /// count from making validation read a megabyte of directory.
    private static let icoCheckedEntries = 256

    /// ICO and CUR (type 1 and 2 of the same format; CUR adds a hotspot): the size of the
    /// first image in the directory. Every listed image is held to the pixel limit, by its
    /// directory entry and by the header of the image itself (a PNG's IHDR, a DIB's header),
    /// since a decoder trusts the embedded header; then every image's bytes must lie inside the body.
    ///
    /// A directory entry stores each side in one byte, 0 meaning 256 or more: for such an
    /// entry holding a PNG, the PNG's own size is reported.
    func validateICO(_ reader: inout ImageByteReader) throws -> ImageInfo {
        let kind = try reader.uint(at: 2, size: 2, .littleEndian) == 2 ? "CUR" : "ICO"
        guard let imageCount = try reader.uint(at: 4, size: 2, .littleEndian),
            try reader.exactly(at: 6, count: 16) != nil
        else {
            throw ImageValidationError.truncated(reason: "\(kind) ends inside its first directory entry")
        }
        var endsEarly: ImageValidationError?
        if 6 + 16 * imageCount > reader.count {
            endsEarly = .truncated(reason: "\(kind)'s directory of \(imageCount) images runs past the end of the body")
        }
        let checked = min(imageCount, Self.icoCheckedEntries, (reader.count - 6) / 16)
        var info: ImageInfo?
        for index in 0..<checked {
            guard let entry = try reader.exactly(at: 6 + 16 * index, count: 16) else { break }  // unreachable: it fits
            let width = entry[0] == 0 ? 256 : Int(entry[0])
            let height = entry[1] == 0 ? 256 : Int(entry[1])
            let size = Int(ImageByteOrder.littleEndian.decode(entry[8..<12]))
            let offset = Int(ImageByteOrder.littleEndian.decode(entry[12..<16]))
            let embedded = try Self.icoEmbeddedSize(at: offset, reader: &reader)
            if let embedded { try checkPixelLimit(width: embedded.width, height: embedded.height) }
            if index == 0 {
                var reported = (width: width, height: height)
                if let embedded, embedded.isPNG, entry[0] == 0 || entry[1] == 0 {
                    reported = (embedded.width, embedded.height)
                }
                info = try checkedInfo(.ico, width: reported.width, height: reported.height, name: kind)
            } else {
                try checkPixelLimit(width: width, height: height)
            }
            if endsEarly == nil, offset > reader.count || size > reader.count - offset {
                endsEarly = .truncated(
                    reason: "\(kind) image \(index + 1) declares \(size) bytes at offset \(offset), past the end of the body")
            }
        }
        if let endsEarly { throw endsEarly }
        guard let info else { preconditionFailure("the first entry fits in the body") }
        return info
    }

    /// The size an embedded image's own header declares: a PNG's IHDR, or a DIB's
    /// BITMAPINFOHEADER (whose height counts the colour rows and the mask rows, so half of it).
    /// Nil when the bytes there are neither, or lie past the end of the body.
    private static func icoEmbeddedSize(
        at offset: Int, reader: inout ImageByteReader
    ) throws -> (width: Int, height: Int, isPNG: Bool)? {
        guard let head = try reader.exactly(at: offset, count: 24) else { return nil }
        if head[0..<8].elementsEqual([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]),
            head[12..<16].elementsEqual("IHDR".utf8)
        {
            return (
                Int(ImageByteOrder.bigEndian.decode(head[16..<20])), Int(ImageByteOrder.bigEndian.decode(head[20..<24])),
                true
            )
        }
        if ImageByteOrder.littleEndian.decode(head[0..<4]) == 40 {
            let width = Int(Int32(truncatingIfNeeded: ImageByteOrder.littleEndian.decode(head[4..<8])).magnitude)
            let rows = Int(Int32(truncatingIfNeeded: ImageByteOrder.littleEndian.decode(head[8..<12])).magnitude)
            return (width, (rows + 1) / 2, false)
        }
        return nil
    }
}
