extension ImageValidator {
    /// The most of an `ftyp` or `ipma` box read; real ones are tens of bytes.
    private static let isoBMFFBoxReadLimit = 64 * 1024

    /// AVIF and HEIC: an ISO-BMFF file whose `ftyp` brands name the format and whose image
    /// properties (`meta` > `iprp` > `ipco`) hold an `ispe` with the size.
    ///
    /// Every top-level box must lie inside the body; the image data (`mdat`) usually comes
    /// last, so a download cut short shows up as its box running past the end.
    func validateISOBMFF(_ reader: inout ImageByteReader) throws -> ImageInfo {
        let count = reader.count
        // The boxes before one that runs past the end still count: `meta` usually precedes
        // `mdat`, so a bomb cut short is still seen as a bomb.
        let (boxes, endsEarly) = try ISOBMFFBox.boxesUntilOverrun(in: 0..<count, reader: &reader) { type, offset, size in
            .truncated(
                reason: "ISO-BMFF box '\(type)' at offset \(offset) declares \(size) bytes "
                    + "but only \(count - offset) remain: the body ends early")
        }
        guard let fileType = boxes.first, fileType.type == "ftyp", fileType.payload.count >= 8 else {
            if let endsEarly, boxes.isEmpty { throw endsEarly }
            throw ImageValidationError.notImage(reason: "ISO-BMFF file does not start with a valid 'ftyp' box")
        }
        let brandBytes = try reader.bytes(
            at: fileType.payload.lowerBound, count: min(fileType.payload.count, Self.isoBMFFBoxReadLimit))
        // The major brand, then (after the minor version) the compatible brands.
        let brands = stride(from: 0, through: brandBytes.count - 4, by: 4)
            .filter { $0 != 4 }
            .map { ISOBMFFBox.fourCC(brandBytes[$0..<$0 + 4]) }
        guard let format = ISOBMFFBox.imageFormat(brands: brands) else {
            throw ImageValidationError.notImage(
                reason: "ISO-BMFF media with brands \(brands.joined(separator: ", ")), not AVIF or HEIC")
        }
        guard let meta = boxes.first(where: { $0.type == "meta" }),
            let sizes = try Self.imageSizes(meta: meta, reader: &reader)
        else {
            if let endsEarly { throw endsEarly }
            return ImageInfo(format: format, width: nil, height: nil)
        }
        // Every image's size is held to the limit (thumbnails, tiles, auxiliary images), the
        // primary one's reported.
        let info = try checkedInfo(
            format, width: sizes.primary.width, height: sizes.primary.height, name: format == .avif ? "AVIF" : "HEIC")
        for size in sizes.all { try checkPixelLimit(width: size.width, height: size.height) }
        if let endsEarly { throw endsEarly }
        return info
    }

    /// The size in the primary item's `ispe` property, or else in the first `ispe`; and the
    /// sizes in every `ispe`.
    ///
    /// The primary item comes first because a HEIC photo from a phone is a grid of tiles: the
    /// tiles' `ispe` (e.g. 512×512) is listed before the grid's own (the whole picture).
    private static func imageSizes(
        meta: ISOBMFFBox, reader: inout ImageByteReader
    ) throws -> (primary: (width: Int, height: Int), all: [(width: Int, height: Int)])? {
        func corrupt(_ type: String, _ offset: Int, _ size: Int) -> ImageValidationError {
            .notImage(reason: "ISO-BMFF box '\(type)' at offset \(offset) runs past the box that holds it")
        }
        // `meta` is a full box: a version and flags come before its children.
        guard meta.payload.count >= 4 else { return nil }
        let metaChildren = try ISOBMFFBox.boxes(
            in: (meta.payload.lowerBound + 4)..<meta.payload.upperBound, reader: &reader, overrun: corrupt)
        guard let properties = metaChildren.first(where: { $0.type == "iprp" }) else { return nil }
        let propertyChildren = try ISOBMFFBox.boxes(in: properties.payload, reader: &reader, overrun: corrupt)
        guard let container = propertyChildren.first(where: { $0.type == "ipco" }) else { return nil }
        let items = try ISOBMFFBox.boxes(in: container.payload, reader: &reader, overrun: corrupt)

        var chosen = items.first(where: { $0.type == "ispe" })
        if let primaryBox = metaChildren.first(where: { $0.type == "pitm" }),
            let primary = try primaryItemID(primaryBox, reader: &reader)
        {
            for associations in propertyChildren where associations.type == "ipma" {
                let indices = try associatedProperties(of: primary, in: associations, reader: &reader)
                if let index = indices.first(where: { items.indices.contains($0) && items[$0].type == "ispe" }) {
                    chosen = items[index]
                    break
                }
            }
        }
        guard let spatialExtent = chosen else { return nil }
        let all = try items.filter { $0.type == "ispe" }.map { try size(of: $0, reader: &reader) }
        return (try size(of: spatialExtent, reader: &reader), all)
    }

    /// The width and height in an `ispe` box.
    private static func size(of spatialExtent: ISOBMFFBox, reader: inout ImageByteReader) throws -> (width: Int, height: Int) {
        // `ispe` is a full box: version and flags (4), then width and height (4 each).
        guard spatialExtent.payload.count >= 12,
            let width = try reader.uint(at: spatialExtent.payload.lowerBound + 4, size: 4, .bigEndian),
            let height = try reader.uint(at: spatialExtent.payload.lowerBound + 8, size: 4, .bigEndian)
        else {
            throw ImageValidationError.notImage(reason: "ISO-BMFF 'ispe' box is too short to hold a size")
        }
        return (width, height)
    }

    /// The item ID in a `pitm` box: 16 bits in version 0, 32 bits after.
    private static func primaryItemID(_ box: ISOBMFFBox, reader: inout ImageByteReader) throws -> Int? {
        guard let version = try reader.byte(at: box.payload.lowerBound) else { return nil }
        let size = version == 0 ? 2 : 4
        guard box.payload.count >= 4 + size else { return nil }
        return try reader.uint(at: box.payload.lowerBound + 4, size: size, .bigEndian)
    }

    /// Zero-based `ipco` indices of the properties an `ipma` box associates with `item`.
    /// Empty when the box does not mention the item or cannot be read.
    private static func associatedProperties(
        of item: Int, in box: ISOBMFFBox, reader: inout ImageByteReader
    ) throws -> [Int] {
        guard box.payload.count <= isoBMFFBoxReadLimit,
            let bytes = try reader.exactly(at: box.payload.lowerBound, count: box.payload.count),
            bytes.count >= 8
        else { return [] }
        let version = bytes[0]
        let wideIndices = bytes[3] & 1 == 1  // flags bit 0: 15-bit property indices
        var position = 8
        /// The next `size` bytes as an integer, or nil when the box ends first.
        func next(_ size: Int) -> Int? {
            guard position + size <= bytes.count else { return nil }
            defer { position += size }
            return Int(ImageByteOrder.bigEndian.decode(bytes[position..<position + size]))
        }
        let entryCount = Int(ImageByteOrder.bigEndian.decode(bytes[4..<8]))
        for _ in 0..<entryCount {
            guard let itemID = next(version < 1 ? 2 : 4), let associationCount = next(1) else { return [] }
            var indices: [Int] = []
            for _ in 0..<associationCount {
                guard let association = next(wideIndices ? 2 : 1) else { return [] }
                // The top bit marks an essential property; the rest is a one-based index (0: none).
                let index = association & (wideIndices ? 0x7FFF : 0x7F)
                if index > 0 { indices.append(index - 1) }
            }
            if itemID == item { return indices }
        }
        return []
    }
}
