/// Outcome of looking at the first bytes of a body while it is still arriving.
public enum ImageSniff: Sendable, Equatable {
    /// The prefix is consistent with an image but too short to tell; look again when more bytes arrive.
    case needMoreBytes
    /// The body is not an image; a download can stop now.
    case notImage
    /// The prefix carries this format's signature. `ImageValidator.validate` still has to check the complete body.
    case image(ImageFormat)
}
