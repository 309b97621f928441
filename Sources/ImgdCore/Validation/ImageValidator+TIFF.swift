extension ImageValidator {
    /// IFDs followed along the chain; past this (a fax of a thousand pages, or a forged chain)
    /// the rest is not checked.
    static let tiffMaximumDirectories = 1024
    /// Strip or tile entries read per step of the bounds check.
    private static let tiffValuesPerRead = 8192

    /// TIFF and BigTIFF: ImageWidth and ImageLength from the first image file directory (IFD)
    /// give the size (as stored: a TIFF's Orientation tag does not swap them).
    ///
    /// TIFF has no end marker and may keep its pixel data anywhere, so completeness is checked
    /// where the IFDs say the data is: every IFD in the chain must be in the body, and every
    /// strip and tile (`StripOffsets` + `StripByteCounts`, `TileOffsets` + `TileByteCounts`)
    /// must lie inside it to its last byte. The layout must be possible: as many strips or tiles
    /// as the size, RowsPerStrip or tile size and planar configuration need, and uncompressed
    /// ones holding their rows (`TIFFDataLayout`). Every IFD's size is held to the pixel limit first.
    func validateTIFF(_ reader: inout ImageByteReader) throws -> ImageInfo {
        let order: ImageByteOrder = try reader.byte(at: 0) == UInt8(ascii: "M") ? .bigEndian : .littleEndian
        guard let version = try reader.uint(at: 2, size: 2, order) else {
            throw ImageValidationError.truncated(reason: "TIFF ends inside its header")
        }
        let layout = TIFFDirectory.Layout(order: order, isBig: version == 43)
        let headerSize = layout.isBig ? 16 : 8
        if layout.isBig {
            guard let offsetSize = try reader.uint(at: 4, size: 2, order),
                let reserved = try reader.uint(at: 6, size: 2, order)
            else { throw ImageValidationError.truncated(reason: "BigTIFF ends inside its header") }
            guard offsetSize == 8, reserved == 0 else {
                throw ImageValidationError.corrupt(
                    reason: "BigTIFF's header declares \(offsetSize)-byte offsets (and \(reserved) reserved); only 8 (and 0) exist")
            }
        }
        guard let first = try reader.exactly(at: headerSize - layout.offsetSize, count: layout.offsetSize) else {
            throw ImageValidationError.truncated(reason: "TIFF ends inside its header")
        }
        let firstOffset = Int(clamping: order.decode(first))
        guard firstOffset >= headerSize else {
            throw ImageValidationError.notImage(reason: "TIFF's first IFD offset (\(firstOffset)) points into its header")
        }

        // Walk the chain: each IFD's size against the pixel limit as soon as it is read.
        var directories: [(directory: TIFFDirectory, size: (width: Int, height: Int)?)] = []
        var visited: Set<Int> = []
        var next = firstOffset
        var info: ImageInfo?
        var endsEarly: ImageValidationError?
        while next != 0, directories.count < Self.tiffMaximumDirectories, visited.insert(next).inserted {
            guard next >= headerSize else {
                throw ImageValidationError.corrupt(
                    reason: "TIFF's IFD \(directories.count + 1) offset (\(next)) points into its header")
            }
            let directory = try TIFFDirectory.read(at: next, index: directories.count, layout: layout, reader: &reader)
            let width = try directory.firstValue(TIFFDirectory.Tag.imageWidth, layout: layout, reader: &reader)
            let height = try directory.firstValue(TIFFDirectory.Tag.imageLength, layout: layout, reader: &reader)
            if directory.index == 0 {
                guard let width, let height else {
                    throw directory.endsEarly
                        ?? .notImage(reason: "TIFF's first IFD has no ImageWidth or no ImageLength")
                }
                info = try checkedInfo(.tiff, width: width, height: height, name: "TIFF")
            } else if let width, let height {
                try checkPixelLimit(width: width, height: height)
            }
            directories.append((directory, width.flatMap { width in height.map { (width, $0) } }))
            if let error = directory.endsEarly {
                endsEarly = error
                break
            }
            next = directory.next ?? 0
        }
        // A loop in the chain ends the walk: the directories in it have all been checked.

        for (directory, size) in directories {
            try checkTIFFData(of: directory, size: size, layout: layout, reader: &reader)
        }
        if let endsEarly { throw endsEarly }
        guard let info else { preconditionFailure("the first IFD either gave a size or threw") }
        return info
    }

    /// Checks that every strip, tile or JPEG stream the IFD locates lies inside the body, and
    /// that its strips or tiles are the ones its size and layout tags need (`TIFFDataLayout`):
    /// enough of them, and for uncompressed data each holding the bytes of its rows.
    private func checkTIFFData(
        of directory: TIFFDirectory, size: (width: Int, height: Int)?, layout: TIFFDirectory.Layout,
        reader: inout ImageByteReader
    ) throws {
        typealias Tag = TIFFDirectory.Tag
        let name = directory.name
        let pairs = [
            ("strip", Tag.stripOffsets, Tag.stripByteCounts),
            ("tile", Tag.tileOffsets, Tag.tileByteCounts),
            ("JPEG stream", Tag.jpegOffset, Tag.jpegLength),
        ]
        // An IFD cut short may have lost the tags its layout depends on: that is reported as the cut.
        var dataLayout: TIFFDataLayout?
        if let size, size.width > 0, size.height > 0, directory.endsEarly == nil {
            dataLayout = try TIFFDataLayout.of(directory, width: size.width, height: size.height, layout: layout, reader: &reader)
        }
        var locatesData = false
        for (kind, offsetsTag, countsTag) in pairs {
            guard let offsets = directory.fields[offsetsTag] else { continue }
            locatesData = true
            // Fewer byte counts than offsets happens (libtiff reads the missing ones as 0):
            // those strips are only checked to start inside the body, unless they are
            // uncompressed, where a count of 0 is no strip.
            let counts = directory.fields[countsTag]
            for field in [offsets, counts].compactMap({ $0 }) {
                let (bytes, overflow) = field.count.multipliedReportingOverflow(by: field.valueSize)
                guard !overflow, field.offset <= reader.count, bytes <= reader.count - field.offset else {
                    throw ImageValidationError.truncated(
                        reason: "TIFF's \(name) keeps its \(field.count) \(kind) entries (tag \(field.tag)) at offset "
                            + "\(field.offset), past the end of the body")
                }
            }
            let pieces = dataLayout.flatMap { $0.kind.rawValue == kind ? $0 : nil }
            if let pieces, offsets.count < pieces.required {
                throw ImageValidationError.corrupt(
                    reason: "TIFF's \(name) lists \(offsets.count) \(kind)s, but \(pieces.explanation) need \(pieces.required)")
            }
            var index = 0
            while index < offsets.count {
                let step = min(Self.tiffValuesPerRead, offsets.count - index)
                let starts = try Self.tiffValues(offsets, from: index, count: step, layout: layout, reader: &reader)
                let counted = min(step, max(0, (counts?.count ?? 0) - index))
                let lengths = try counts.map { try Self.tiffValues($0, from: index, count: counted, layout: layout, reader: &reader) }
                for item in 0..<step {
                    let start = starts[item]
                    let stated = item < counted ? lengths?[item] : nil
                    let length = stated ?? 0
                    let label = "\(kind) \(index + item + 1) of \(offsets.count) in its \(name)"
                    guard start <= reader.count, length <= reader.count - start else {
                        throw ImageValidationError.truncated(
                            reason: "TIFF's \(label) (\(length) bytes at offset \(start)) runs past the end of the body "
                                + "(\(reader.count) bytes): the body ends early")
                    }
                    // Only the pieces the image needs are read; extra ones are ignored by decoders.
                    guard let pieces, index + item < pieces.required else { continue }
                    try Self.checkTIFFPiece(
                        label, at: start, stated: counts == nil ? nil : length, needs: pieces.neededBytes(of: index + item),
                        uncompressed: pieces.isUncompressed, bodyCount: reader.count)
                }
                index += step
            }
        }
        if directory.index == 0, !locatesData, directory.endsEarly == nil {
            throw ImageValidationError.corrupt(
                reason: "TIFF's first IFD has no StripOffsets or TileOffsets: it does not say where its pixels are")
        }
    }

    /// An uncompressed strip or tile: a stated byte count must be non-zero and hold the bytes
    /// its rows need; without byte counts (libtiff then assumes the rows' size) those bytes
    /// must lie in the body.
    private static func checkTIFFPiece(
        _ label: String, at start: Int, stated: Int?, needs: Int?, uncompressed: Bool, bodyCount: Int
    ) throws {
        guard uncompressed else { return }
        if let stated {
            guard stated > 0 else {
                throw ImageValidationError.corrupt(reason: "TIFF's uncompressed \(label) has a byte count of 0")
            }
            if let needs, stated < needs {
                throw ImageValidationError.corrupt(
                    reason: "TIFF's uncompressed \(label) holds \(stated) bytes, but its rows need \(needs)")
            }
        } else if let needs, needs > bodyCount - start {
            throw ImageValidationError.truncated(
                reason: "TIFF's uncompressed \(label) needs \(needs) bytes at offset \(start), past the end of the body "
                    + "(\(bodyCount) bytes): the body ends early")
        }
    }

    /// `count` values of an array entry starting at its `from`-th value.
    private static func tiffValues(
        _ field: TIFFDirectory.Field, from: Int, count: Int, layout: TIFFDirectory.Layout, reader: inout ImageByteReader
    ) throws -> [Int] {
        let size = field.valueSize
        let bytes = try reader.bytes(at: field.offset + from * size, count: count * size)
        precondition(bytes.count == count * size, "the array was checked to lie in the body")
        return (0..<count).map { Int(clamping: layout.order.decode(bytes[$0 * size..<($0 + 1) * size])) }
    }
}
