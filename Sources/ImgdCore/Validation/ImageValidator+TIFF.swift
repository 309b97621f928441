extension ImageValidator {
    /// The IFD entry tags and field types that carry a TIFF's size.
    private enum TIFFTag {
        static let imageWidth = 256
        static let imageLength = 257
        static let short = 3
        static let long = 4
    }

    /// TIFF: ImageWidth and ImageLength from the first image file directory (IFD).
    ///
    /// TIFF has no end marker and may keep its strips anywhere in the file, so completeness is
    /// checked only as far as the first IFD: it must lie inside the body.
    func validateTIFF(_ reader: inout ImageByteReader) throws -> ImageInfo {
        let order: ImageByteOrder = try reader.byte(at: 0) == UInt8(ascii: "M") ? .bigEndian : .littleEndian
        guard let directory = try reader.uint(at: 4, size: 4, order) else {
            throw ImageValidationError.truncated(reason: "TIFF ends inside its header")
        }
        guard directory >= 8 else {
            throw ImageValidationError.notImage(reason: "TIFF's first IFD offset (\(directory)) points into its header")
        }
        guard let entryCount = try reader.uint(at: directory, size: 2, order) else {
            throw ImageValidationError.truncated(
                reason: "TIFF's first IFD at offset \(directory) lies past the end of the body")
        }
        guard entryCount > 0 else { throw ImageValidationError.notImage(reason: "TIFF's first IFD is empty") }
        guard directory + 2 + entryCount * 12 <= reader.count else {
            throw ImageValidationError.truncated(reason: "TIFF ends inside its first IFD")
        }
        var width: Int?
        var height: Int?
        for index in 0..<entryCount {
            if width != nil && height != nil { break }
            let entry = directory + 2 + index * 12
            guard let tag = try reader.uint(at: entry, size: 2, order),
                tag == TIFFTag.imageWidth || tag == TIFFTag.imageLength,
                let type = try reader.uint(at: entry + 2, size: 2, order)
            else { continue }
            // A value of 4 bytes or less sits in the entry itself, left-justified: a SHORT is in
            // its first two bytes whatever the byte order.
            let value: Int?
            switch type {
            case TIFFTag.short: value = try reader.uint(at: entry + 8, size: 2, order)
            case TIFFTag.long: value = try reader.uint(at: entry + 8, size: 4, order)
            default:
                throw ImageValidationError.notImage(
                    reason: "TIFF's tag \(tag) has field type \(type), not SHORT or LONG")
            }
            if tag == TIFFTag.imageWidth { width = value } else { height = value }
        }
        guard let width, let height else {
            throw ImageValidationError.notImage(reason: "TIFF's first IFD has no ImageWidth or no ImageLength")
        }
        return try checkedInfo(.tiff, width: width, height: height, name: "TIFF")
    }
}
