/// One image file directory (IFD) of a TIFF or BigTIFF, as much of it as validation needs:
/// the size, where the pixel data lies and how it is cut into strips or tiles, and where the
/// next IFD is.
struct TIFFDirectory {
    /// How a TIFF file lays out its structures: classic TIFF (version 42) has 2-byte entry
    /// counts, 12-byte entries and 4-byte offsets; BigTIFF (version 43) 8-byte counts, 20-byte
    /// entries and 8-byte offsets.
    struct Layout {
        var order: ImageByteOrder
        var isBig: Bool

        var countSize: Int { isBig ? 8 : 2 }
        var entrySize: Int { isBig ? 20 : 12 }
        var offsetSize: Int { isBig ? 8 : 4 }
        /// Where an entry's value (or the offset of its values) starts within the entry.
        var valueField: Int { isBig ? 12 : 8 }
    }

    /// An entry whose values validation reads: their field type, how many, and where they lie.
    struct Field {
        var tag: Int
        var type: Int
        var count: Int
        /// The body offset of the first value (inside the entry when they fit in its value field).
        var offset: Int
        /// Bytes per value: 2 for SHORT, 4 for LONG, 8 for LONG8 (1 for BYTE).
        var valueSize: Int
    }

    /// The tags validation reads.
    enum Tag {
        static let imageWidth = 256
        static let imageLength = 257
        static let bitsPerSample = 258
        static let compression = 259
        static let photometric = 262
        static let stripOffsets = 273
        static let samplesPerPixel = 277
        static let rowsPerStrip = 278
        static let stripByteCounts = 279
        static let planarConfiguration = 284
        static let tileWidth = 322
        static let tileLength = 323
        static let tileOffsets = 324
        static let tileByteCounts = 325
        /// Old-style JPEG TIFFs and EXIF thumbnails locate their data with these two.
        static let jpegOffset = 513
        static let jpegLength = 514

        /// The tags that say how the pixel data is cut into strips or tiles (`TIFFDataLayout`).
        /// One with a field type that is not an integer is left out, and so is that check:
        /// libtiff warns about such a tag and reads the image with the tag's default.
        static let layout: Set = [
            bitsPerSample, compression, photometric, samplesPerPixel, rowsPerStrip, planarConfiguration,
            tileWidth, tileLength,
        ]
        static let read: Set = layout.union([
            imageWidth, imageLength, stripOffsets, stripByteCounts, tileOffsets, tileByteCounts, jpegOffset, jpegLength,
        ])
    }

    /// More entries than this is not a directory (libtiff refuses it the same way).
    static let maximumEntries = 4096

    /// Where this IFD starts, and its position in the chain (0 for the first).
    var offset: Int
    var index: Int
    /// The entries validation reads, by tag.
    var fields: [Int: Field] = [:]
    /// The next IFD's offset (0: none); nil when the body ends before it.
    var next: Int?
    /// Set when the body ends inside this IFD: its entries up to there were read.
    var endsEarly: ImageValidationError?
    /// Layout tags present with a field type that is not an integer.
    var unreadable: Set<Int> = []

    /// Reads the IFD at `offset`, keeping what lies in the body when it is cut short (so a
    /// size that is over the pixel limit is seen before the truncation is reported).
    ///
    /// - Throws: `.truncated` when not even the entry count is in the body; `.corrupt` when
    ///   the entry count is impossible or a needed entry has the wrong field type.
    static func read(
        at offset: Int, index: Int, layout: Layout, reader: inout ImageByteReader
    ) throws -> TIFFDirectory {
        let name = Self.name(index)
        guard let rawCount = try count(at: offset, layout: layout, reader: &reader) else {
            throw ImageValidationError.truncated(
                reason: "TIFF's \(name) at offset \(offset) lies past the end of the body")
        }
        guard rawCount > 0 else {
            if index == 0 { throw ImageValidationError.notImage(reason: "TIFF's first IFD is empty") }
            throw ImageValidationError.corrupt(reason: "TIFF's \(name) at offset \(offset) is empty")
        }
        guard rawCount <= UInt64(maximumEntries) else {
            throw ImageValidationError.corrupt(
                reason: "TIFF's \(name) at offset \(offset) claims \(rawCount) entries, more than the \(maximumEntries) a directory may hold")
        }
        let entryCount = Int(rawCount)
        var directory = TIFFDirectory(offset: offset, index: index)
        let entriesStart = offset + layout.countSize
        let fitting = min(entryCount, max(0, reader.count - entriesStart) / layout.entrySize)
        let entries = try reader.bytes(at: entriesStart, count: fitting * layout.entrySize)
        for entry in 0..<fitting {
            let start = entry * layout.entrySize
            let tag = Int(layout.order.decode(entries[start..<start + 2]))
            guard Tag.read.contains(tag) else { continue }
            let type = Int(layout.order.decode(entries[start + 2..<start + 4]))
            // SHORT and LONG (LONG8 in BigTIFF) are what the specification asks for; libtiff also
            // reads the other integer types here, and so do we.
            let valueSize: Int
            switch type {
            case 1: valueSize = 1  // BYTE
            case 3, 8: valueSize = 2  // SHORT, SSHORT
            case 4, 9, 13: valueSize = 4  // LONG, SLONG, IFD
            case 16...18 where layout.isBig: valueSize = 8  // LONG8, SLONG8, IFD8
            default:
                if Tag.layout.contains(tag) {
                    directory.unreadable.insert(tag)
                    continue
                }
                throw ImageValidationError.corrupt(
                    reason: "TIFF's \(name) gives tag \(tag) field type \(type), not an integer type")
            }
            let countBytes = entries[start + 4..<start + 4 + (layout.isBig ? 8 : 4)]
            // A count that does not fit an Int cannot lie in the body either: clamp it, and the
            // bounds check reports it.
            let count = Int(clamping: layout.order.decode(countBytes))
            let valueField = entriesStart + start + layout.valueField
            let dataOffset: Int
            if count <= layout.offsetSize / valueSize {
                dataOffset = valueField  // the values sit in the entry itself, left-justified
            } else {
                let pointer = entries[start + layout.valueField..<start + layout.valueField + layout.offsetSize]
                dataOffset = Int(clamping: layout.order.decode(pointer))
            }
            directory.fields[tag] = Field(tag: tag, type: type, count: count, offset: dataOffset, valueSize: valueSize)
        }
        guard fitting == entryCount else {
            directory.endsEarly = .truncated(reason: "TIFF ends inside its \(name), at offset \(offset)")
            return directory
        }
        let nextOffset = entriesStart + entryCount * layout.entrySize
        if let bytes = try reader.exactly(at: nextOffset, count: layout.offsetSize) {
            directory.next = Int(clamping: layout.order.decode(bytes))
        } else {
            directory.endsEarly = .truncated(
                reason: "TIFF ends inside its \(name), before the offset of the next IFD")
        }
        return directory
    }

    /// "first IFD", "IFD 2", …, for messages.
    var name: String { Self.name(index) }

    static func name(_ index: Int) -> String { index == 0 ? "first IFD" : "IFD \(index + 1)" }

    /// The first value of `tag`, or nil when the entry is absent or holds no value.
    func firstValue(_ tag: Int, layout: Layout, reader: inout ImageByteReader) throws -> Int? {
        guard let field = fields[tag], field.count > 0,
            let bytes = try reader.exactly(at: field.offset, count: field.valueSize)
        else { return nil }
        return Int(clamping: layout.order.decode(bytes))
    }

    /// The entry count at the start of an IFD, or nil when the body ends first.
    private static func count(at offset: Int, layout: Layout, reader: inout ImageByteReader) throws -> UInt64? {
        guard let bytes = try reader.exactly(at: offset, count: layout.countSize) else { return nil }
        return layout.order.decode(bytes)
    }
}
