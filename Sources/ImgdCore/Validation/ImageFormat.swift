/// The image formats imgd recognises.
///
/// The raw values are the lower-case names used in logs and in the control protocol. `tiff`
/// covers BigTIFF, and `ico` covers cursors (`.cur`), the same format with another type field.
public enum ImageFormat: String, Sendable, Codable, CaseIterable {
    case jpeg, png, gif, webp, bmp, tiff, avif, heic, ico, svg
}
