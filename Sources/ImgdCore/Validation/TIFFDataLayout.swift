/// How an IFD's pixel data must be cut into strips or tiles (TIFF 6.0, sections 3, 7 and 15):
/// how many the image needs, and how many bytes each needs when it is stored uncompressed.
///
/// Strips: ImageLength rows in strips of RowsPerStrip rows (default: all of them), the last
/// one shorter; with PlanarConfiguration 2 (planar) that many for each of SamplesPerPixel
/// planes. Tiles: TileWidth × TileLength pieces covering the image, every one full size (the
/// edge ones padded), again once per plane when planar. Uncompressed (Compression 1), a strip
/// holds its rows of `ceil(width × samples × BitsPerSample / 8)` bytes; YCbCr data with
/// subsampling packs differently, so its size is not judged.
struct TIFFDataLayout {
    enum Kind: String {
        case strip, tile
    }

    let kind: Kind
    /// Strips or tiles the image needs.
    let required: Int
    /// True when the data is stored as it is (Compression 1): its byte counts must be non-zero.
    let isUncompressed: Bool
    /// Pieces in one plane, and rows in one piece (a strip's or a tile's).
    private let perPlane: Int
    private let rowsPerPiece: Int
    private let imageLength: Int
    /// Bytes in one row of one piece; nil when unknown or not judged.
    private let rowBytes: Int?
    /// The phrase that says where `required` comes from, for messages.
    let explanation: String

    /// The layout of `directory`, or nil when a tag it depends on could not be read.
    ///
    /// - Throws: `.corrupt` for a tile size of 0, which no image can be cut into.
    static func of(
        _ directory: TIFFDirectory, width: Int, height: Int, layout: TIFFDirectory.Layout,
        reader: inout ImageByteReader
    ) throws -> TIFFDataLayout? {
        typealias Tag = TIFFDirectory.Tag
        guard directory.unreadable.isEmpty else { return nil }
        func value(_ tag: Int) throws -> Int? { try directory.firstValue(tag, layout: layout, reader: &reader) }
        // A tag present whose values lie outside the body: nothing to compute from.
        for tag in Tag.layout where directory.fields[tag] != nil {
            if try value(tag) == nil { return nil }
        }
        let samples = max(1, try value(Tag.samplesPerPixel) ?? 1)
        let isPlanar = try value(Tag.planarConfiguration) == 2 && samples > 1
        let planes = isPlanar ? samples : 1
        let compression = try value(Tag.compression) ?? 1
        let bits = try value(Tag.bitsPerSample) ?? 1
        let photometric = try value(Tag.photometric)
        let judgesSize = compression == 1 && bits > 0 && photometric != 6
        let samplesPerRow = isPlanar ? 1 : samples

        let kind: Kind
        let perPlane: Int
        let rowsPerPiece: Int
        let pieceWidth: Int
        let explanation: String
        if directory.fields[Tag.tileOffsets] != nil {
            guard let tileWidth = try value(Tag.tileWidth), let tileLength = try value(Tag.tileLength) else { return nil }
            guard tileWidth > 0, tileLength > 0 else {
                throw ImageValidationError.corrupt(
                    reason: "TIFF's \(directory.name) declares \(tileWidth)×\(tileLength) tiles: no image can be cut into them")
            }
            kind = .tile
            perPlane = (width + tileWidth - 1) / tileWidth * ((height + tileLength - 1) / tileLength)
            rowsPerPiece = tileLength
            pieceWidth = tileWidth
            explanation = "its \(width)×\(height) pixels in \(tileWidth)×\(tileLength) tiles"
        } else {
            // RowsPerStrip 0 is no value libtiff accepts; it reads the image as one strip, as without the tag.
            let rows = try value(Tag.rowsPerStrip) ?? 0
            rowsPerPiece = rows == 0 ? height : min(rows, height)
            kind = .strip
            perPlane = (height + rowsPerPiece - 1) / rowsPerPiece
            pieceWidth = width
            explanation = "its \(height) rows at \(rowsPerPiece) rows per strip"
        }
        let bitsPerRow = pieceWidth.multipliedReportingOverflow(by: samplesPerRow)
        let allBits = bitsPerRow.partialValue.multipliedReportingOverflow(by: bits)
        let rowBytes = judgesSize && !bitsPerRow.overflow && !allBits.overflow ? (allBits.partialValue + 7) / 8 : nil
        return TIFFDataLayout(
            kind: kind, required: perPlane * planes, isUncompressed: compression == 1, perPlane: perPlane,
            rowsPerPiece: rowsPerPiece, imageLength: height, rowBytes: rowBytes,
            explanation: explanation + (planes > 1 ? ", once for each of \(planes) planes," : ""))
    }

    /// The bytes piece `index` (0-based) needs uncompressed, or nil when that is not judged.
    func neededBytes(of index: Int) -> Int? {
        guard let rowBytes else { return nil }
        var rows = rowsPerPiece
        if kind == .strip {
            // The last strip of a plane holds what is left.
            rows = min(rowsPerPiece, imageLength - index % perPlane * rowsPerPiece)
        }
        let (bytes, overflow) = rows.multipliedReportingOverflow(by: rowBytes)
        return overflow ? nil : bytes
    }
}
