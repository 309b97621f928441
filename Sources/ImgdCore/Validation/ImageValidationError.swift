/// Why `ImageValidator` rejected a body.
///
/// Each `reason` is a sentence for a person reading a log, e.g.
/// "PNG has no IEND chunk: the body ends early".
public enum ImageValidationError: Error, Sendable, Equatable {
    /// The bytes are not an image imgd recognises (an HTML page, JSON, an unknown signature, a
    /// header that makes no sense).
    case notImage(reason: String)
    /// The bytes start like an image but end early: a download cut short. Fetching again may help.
    case truncated(reason: String)
    /// The bytes arrived whole but are damaged: a checksum fails (a PNG chunk's CRC-32), a part
    /// every decoder needs is missing or impossible (a PNG without IDAT, a TIFF IFD that cannot be
    /// parsed). Fetching again will not help.
    case corrupt(reason: String)
    /// The headers declare more pixels than the validator's `maxPixels` allows; decoding it would take too much memory.
    case tooManyPixels(width: Int, height: Int, limit: Int)
}
