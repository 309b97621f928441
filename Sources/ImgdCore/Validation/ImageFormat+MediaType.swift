extension ImageFormat {
    /// The media type a response carrying an image of this format names (`Content-Type`): the
    /// format imgd sniffed from the bytes, not what the origin said.
    public var mediaType: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .png: "image/png"
        case .gif: "image/gif"
        case .webp: "image/webp"
        case .bmp: "image/bmp"
        case .tiff: "image/tiff"
        case .avif: "image/avif"
        case .heic: "image/heic"
        case .ico: "image/vnd.microsoft.icon"
        case .svg: "image/svg+xml"
        }
    }
}
