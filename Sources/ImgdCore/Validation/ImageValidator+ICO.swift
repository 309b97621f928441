extension ImageValidator {
    /// Directory entries checked for their data range; icons hold a handful of images, and the
    /// cap keeps a forged count from making validation read a megabyte of directory.
    private static let icoCheckedEntries = 256

    /// ICO: the size of the first image in the directory (a 0 byte means 256); every listed
    /// image's bytes must lie inside the body.
    func validateICO(_ reader: inout ImageByteReader) throws -> ImageInfo {
        guard let imageCount = try reader.uint(at: 4, size: 2, .littleEndian),
            let first = try reader.exactly(at: 6, count: 16)
        else {
            throw ImageValidationError.truncated(reason: "ICO ends inside its first directory entry")
        }
        let info = try checkedInfo(
            .ico, width: first[0] == 0 ? 256 : Int(first[0]), height: first[1] == 0 ? 256 : Int(first[1]), name: "ICO")
        guard 6 + 16 * imageCount <= reader.count else {
            throw ImageValidationError.truncated(reason: "ICO's directory of \(imageCount) images runs past the end of the body")
        }
        for index in 0..<min(imageCount, Self.icoCheckedEntries) {
            let entry = 6 + 16 * index
            guard let size = try reader.uint(at: entry + 8, size: 4, .littleEndian),
                let offset = try reader.uint(at: entry + 12, size: 4, .littleEndian)
            else { continue }  // unreachable: the directory fits in the body
            guard offset + size <= reader.count else {
                throw ImageValidationError.truncated(
                    reason: "ICO image \(index + 1) declares \(size) bytes at offset \(offset), past the end of the body")
            }
        }
        return info
    }
}
