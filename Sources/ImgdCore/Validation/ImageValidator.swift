/// Sniffs and validates image bytes without decoding pixels.
///
/// `sniff` looks at the first bytes of a body while it is still arriving, so a download that
/// turns out to be an HTML error page can stop early. `validate` checks a complete body before
/// it is published to the cache: format, dimensions from the headers (as stored: an EXIF or
/// TIFF orientation does not swap them), the pixel limit for every frame and sub-image, checked
/// before anything else, structural completeness (a download cut short fails here) and damage
/// (a PNG chunk whose CRC-32 fails). It reads only what it needs — the head, a walk of headers
/// and the last bytes — except for PNG, whose CRCs take one front-to-back pass in bounded pieces.
///
/// Defaults: `maxPixels` is 100_000_000 (100 megapixels).
public struct ImageValidator: Sendable {
    /// The largest `width * height` accepted: 100_000_000 (100 megapixels) by default.
    /// Decoding takes about 4 bytes per pixel, so this bounds what one cached image can cost a client.
    public var maxPixels: Int

    public init(maxPixels: Int = 100_000_000) {
        self.maxPixels = maxPixels
    }

    /// How much text `sniff` reads looking for `<svg`, past a BOM, whitespace, an XML
    /// declaration, comments and a doctype.
    static let sniffTextLimit = 1024
    /// How much text `validate` reads for an SVG's prolog and root start tag.
    static let svgTextLimit = 64 * 1024
    /// What `validate` reads first: enough for every binary signature and most SVG prologs.
    static let headLength = 1024

    // MARK: - Sniffing

    /// Decides from a prefix (e.g. the first bytes curl delivered) whether the body can be an image.
    ///
    /// Answers `.image` or `.notImage` once 32 bytes are available for binary formats (an
    /// ISO-BMFF `ftyp` box's brands: the box or its first 256 bytes); SVG text
    /// may need up to 1024 bytes. Text that is clearly HTML is refused as soon as it shows.
    /// - Parameter isComplete: no more bytes will come, so "need more" becomes "not an image".
    public static func sniff(_ prefix: UnsafeRawBufferPointer, isComplete: Bool) -> ImageSniff {
        guard !prefix.isEmpty else { return isComplete ? .notImage : .needMoreBytes }
        let binary = ImageSignature.match(prefix)
        if case .format(let format) = binary { return .image(format) }
        let markup = SVGProlog.scan(prefix, limit: sniffTextLimit, isComplete: isComplete)
        if case .svgRoot = markup { return .image(.svg) }
        if !isComplete && (binary == .needMoreBytes || markup == .needMoreBytes) { return .needMoreBytes }
        return .notImage
    }

    /// Decides from a prefix whether the body can be an image; see the `UnsafeRawBufferPointer` variant.
    public static func sniff(_ prefix: [UInt8], isComplete: Bool) -> ImageSniff {
        prefix.withUnsafeBytes { sniff($0, isComplete: isComplete) }
    }

    // MARK: - Validation

    /// Fully checks a complete body: format, dimensions from its headers, structural
    /// completeness and the pixel limit.
    ///
    /// - Parameter walked: a PNG's chunk walk made while the body arrived (``PNGArrivalWalk``):
    ///   used instead of reading the body again when it saw every byte of a body of this size.
    /// - Throws: `ImageValidationError`, or the error the source throws when a read fails.
    public func validate(_ source: some ImageByteSource, walked: PNGArrivalWalk? = nil) throws -> ImageInfo {
        var reader = ImageByteReader(source)
        guard reader.count > 0 else { throw ImageValidationError.notImage(reason: "empty body") }
        // `count` is what the caller believes the body holds (for a body spilled to a file, the
        // bytes written to it). A file that holds less must fail here whatever the format's own
        // size fields say: a WebP's RIFF size, say, is only compared with `count`.
        guard try reader.byte(at: reader.count - 1) != nil else {
            throw ImageValidationError.truncated(reason: "the body holds fewer than the \(reader.count) bytes expected")
        }
        let head = try reader.bytes(at: 0, count: Self.headLength)
        let binary = head.withUnsafeBytes { ImageSignature.match($0) }
        if case .format(let format) = binary { return try validate(format, &reader, walked: walked) }

        var text = head
        var markup = text.withUnsafeBytes {
            SVGProlog.scan($0, limit: .max, isComplete: text.count == reader.count)
        }
        if markup == .needMoreBytes {
            // A long prolog (comments, a doctype with an internal subset): look further, within bounds.
            text = try reader.bytes(at: 0, count: Self.svgTextLimit)
            markup = text.withUnsafeBytes {
                SVGProlog.scan($0, limit: Self.svgTextLimit, isComplete: text.count == reader.count)
            }
        }
        switch markup {
        case .svgRoot(let offset):
            return try validateSVG(&reader, text: text, rootOffset: offset)
        case .notSVG(let reason?):
            throw ImageValidationError.notImage(reason: reason)
        case .notSVG(nil), .needMoreBytes:
            if binary == .needMoreBytes {
                let start = head.prefix(4).map(ImageSignature.hex).joined(separator: " ")
                throw ImageValidationError.notImage(
                    reason: "a body of \(reader.count) bytes (starting \(start)) is too short to be an image")
            }
            throw ImageValidationError.notImage(reason: head.withUnsafeBytes { ImageSignature.describe($0) })
        }
    }

    private func validate(_ format: ImageFormat, _ reader: inout ImageByteReader, walked: PNGArrivalWalk?) throws -> ImageInfo {
        switch format {
        case .jpeg: try validateJPEG(&reader)
        case .png: try validatePNG(&reader, walked: walked)
        case .gif: try validateGIF(&reader)
        case .webp: try validateWebP(&reader)
        case .bmp: try validateBMP(&reader)
        case .tiff: try validateTIFF(&reader)
        case .avif, .heic: try validateISOBMFF(&reader)
        case .ico: try validateICO(&reader)
        case .svg: preconditionFailure("SVG is text and has no binary signature")
        }
    }

    /// Throws `.tooManyPixels` when `width * height` exceeds `maxPixels` (or overflows).
    func checkPixelLimit(width: Int, height: Int) throws {
        let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
        if overflow || pixels > maxPixels {
            throw ImageValidationError.tooManyPixels(width: width, height: height, limit: maxPixels)
        }
    }

    /// The info for a binary format's dimensions, after checking they are positive and within the pixel limit.
    ///
    /// Called as soon as a header yields the size, before the completeness checks: a body that is
    /// both cut short and too large should be refused as too large, since fetching it again
    /// cannot help.
    func checkedInfo(_ format: ImageFormat, width: Int, height: Int, name: String) throws -> ImageInfo {
        guard width > 0, height > 0 else {
            throw ImageValidationError.notImage(reason: "\(name) declares a size of \(width)×\(height) pixels")
        }
        try checkPixelLimit(width: width, height: height)
        return ImageInfo(format: format, width: width, height: height)
    }
}
