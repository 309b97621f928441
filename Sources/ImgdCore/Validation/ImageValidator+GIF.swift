extension ImageValidator {
    /// GIF: the logical screen descriptor after the signature gives the size; a complete file ends with the 0x3B trailer.
    func validateGIF(_ reader: inout ImageByteReader) throws -> ImageInfo {
        guard let width = try reader.uint(at: 6, size: 2, .littleEndian),
            let height = try reader.uint(at: 8, size: 2, .littleEndian)
        else {
            throw ImageValidationError.truncated(reason: "GIF ends inside its logical screen descriptor")
        }
        let info = try checkedInfo(.gif, width: width, height: height, name: "GIF")
        guard try reader.byte(at: reader.count - 1) == 0x3B else {
            throw ImageValidationError.truncated(reason: "GIF does not end with its trailer byte (3B): the body ends early")
        }
        return info
    }
}
