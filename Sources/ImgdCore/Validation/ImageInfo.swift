/// What validation learned about a complete image.
///
/// `width` and `height` are nil only when the format allows an image without a stated size:
/// an SVG with neither usable `width`/`height` attributes nor a `viewBox`, or an AVIF/HEIC file
/// without an `ispe` property. Otherwise both are set and positive.
public struct ImageInfo: Sendable, Equatable {
    /// The format the bytes are in.
    public var format: ImageFormat
    /// Width in pixels, from the format's headers.
    public var width: Int?
    /// Height in pixels, from the format's headers.
    public var height: Int?

    public init(format: ImageFormat, width: Int?, height: Int?) {
        self.format = format
        self.width = width
        self.height = height
    }
}
