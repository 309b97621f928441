/// One box of an ISO base media file (the container of AVIF and HEIC): its type and where its
/// payload lies in the body.
struct ISOBMFFBox {
    /// The four-character type, e.g. "ftyp", "meta", "ispe".
    let type: String
    /// Where the payload (after the size and type fields) lies in the body.
    let payload: Range<Int>

    /// A walk stops here: real files have a few dozen boxes at any level, and without a cap a
    /// body of 8-byte boxes would make validation read all of it.
    static let maximumBoxesPerLevel = 4096

    /// The format an `ftyp` box's brands (major and compatible) announce, or nil for other media.
    /// An AVIF brand wins over the generic HEIF ones, because AVIF files list `mif1` too.
    static func imageFormat(brands: [String]) -> ImageFormat? {
        if brands.contains(where: { $0 == "avif" || $0 == "avis" }) { return .avif }
        let heifBrands: Set = ["heic", "heix", "hevc", "hevx", "mif1", "msf1"]
        if brands.contains(where: heifBrands.contains) { return .heic }
        return nil
    }

    /// Four bytes as text; bytes that are not ASCII letters show as replacement characters.
    static func fourCC(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// The boxes that tile `range`, in order.
    ///
    /// - Parameter overrun: the error for a box whose size runs past `range`; at the top level
    ///   that means the body ends early, inside a box it means the file is corrupt.
    static func boxes(
        in range: Range<Int>, reader: inout ImageByteReader,
        overrun: (_ type: String, _ offset: Int, _ size: Int) -> ImageValidationError
    ) throws -> [ISOBMFFBox] {
        let (boxes, error) = try boxesUntilOverrun(in: range, reader: &reader, overrun: overrun)
        if let error { throw error }
        return boxes
    }

    /// The boxes that tile `range`, in order, up to the first that runs past it, and the
    /// `overrun` error for that one: the caller may look at the boxes before it (a size that
    /// is over the pixel limit) before reporting the overrun.
    static func boxesUntilOverrun(
        in range: Range<Int>, reader: inout ImageByteReader,
        overrun: (_ type: String, _ offset: Int, _ size: Int) -> ImageValidationError
    ) throws -> (boxes: [ISOBMFFBox], overrun: ImageValidationError?) {
        var boxes: [ISOBMFFBox] = []
        var offset = range.lowerBound
        while offset < range.upperBound {
            guard boxes.count < maximumBoxesPerLevel else {
                throw ImageValidationError.notImage(
                    reason: "ISO-BMFF file has more than \(maximumBoxesPerLevel) boxes in one level")
            }
            guard offset + 8 <= range.upperBound, let header = try reader.exactly(at: offset, count: 8) else {
                return (boxes, overrun("header", offset, 8))
            }
            let type = fourCC(header[4..<8])
            var headerSize = 8
            var size = Int(ImageByteOrder.bigEndian.decode(header[0..<4]))
            if size == 1 {
                // A 64-bit "largesize" follows the type.
                guard let large = try reader.uint64(at: offset + 8, .bigEndian) else {
                    return (boxes, overrun(type, offset, 16))
                }
                headerSize = 16
                size = Int(exactly: large) ?? Int.max
            } else if size == 0 {
                size = range.upperBound - offset  // "extends to the end of the enclosing box"
            }
            guard size >= headerSize else {
                throw ImageValidationError.notImage(
                    reason: "ISO-BMFF box '\(type)' at offset \(offset) declares an impossible size of \(size) bytes")
            }
            guard size <= range.upperBound - offset else { return (boxes, overrun(type, offset, size)) }
            boxes.append(ISOBMFFBox(type: type, payload: (offset + headerSize)..<(offset + size)))
            offset += size
        }
        return (boxes, nil)
    }
}
