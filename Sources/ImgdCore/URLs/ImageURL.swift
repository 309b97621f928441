import CCurlShim
import ImgdBase

/// An http(s) URL of an image, parsed and normalised with libcurl's URL API.
///
/// Normalisation makes equal resources share one cache key: the scheme and host are lower-cased,
/// the default port (80 for http, 443 for https) and the fragment are dropped. The path and
/// query are kept exactly, since servers may treat their case and order as meaningful.
public struct ImageURL: Hashable, Sendable, CustomStringConvertible {
    /// The longest URL accepted, in bytes: longer lines in a link list are reported, not fetched.
    public static let maximumLength = 8192

    /// The normalised URL, as fetched and as hashed into the cache key.
    public let normalized: String
    /// `http` or `https`.
    public let scheme: String
    /// The host, lower-cased (IPv6 literals keep their brackets).
    public let host: String
    /// The port, explicit or the scheme's default.
    public let port: Int

    /// Parses and normalises `text`. Throws when it is not an absolute http(s) URL.
    public init(_ text: String) throws(ImageURLError) {
        guard !text.isEmpty else { throw .empty }
        guard text.utf8.count <= Self.maximumLength else {
            throw .tooLong(length: text.utf8.count, limit: Self.maximumLength)
        }
        // Bytes, not scalars: every space and control character is one byte below 0x80 in
        // UTF-8, and no byte of a longer sequence is below 0x80 (cheaper on the lookup path).
        if text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }),
            let bad = text.unicodeScalars.first(where: { $0.value <= 0x20 || $0.value == 0x7F })
        {
            throw .malformed(text, reason: "contains a space or control character (U+\(String(bad.value, radix: 16, uppercase: true)))")
        }
        guard let handle = curl_url() else { throw .malformed(text, reason: "libcurl could not allocate a URL handle") }
        defer { curl_url_cleanup(handle) }

        let setCode = curl_url_set(handle, CURLUPART_URL, text, 0)
        guard setCode == CURLUE_OK else {
            throw .malformed(text, reason: String(cString: curl_url_strerror(setCode)))
        }
        guard let scheme = Self.part(handle, CURLUPART_SCHEME, flags: 0)?.lowercased() else {
            throw .malformed(text, reason: "no scheme")
        }
        guard scheme == "http" || scheme == "https" else { throw .unsupportedScheme(scheme) }
        guard let givenHost = Self.part(handle, CURLUPART_HOST, flags: 0), !givenHost.isEmpty else {
            throw .malformed(text, reason: "no host")
        }
        let host = givenHost.lowercased()
        guard host == givenHost || curl_url_set(handle, CURLUPART_HOST, host, 0) == CURLUE_OK,
            curl_url_set(handle, CURLUPART_FRAGMENT, nil, 0) == CURLUE_OK,
            let portText = Self.part(handle, CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)),
            let port = Int(portText),
            let normalized = Self.part(handle, CURLUPART_URL, flags: UInt32(CURLU_NO_DEFAULT_PORT))
        else {
            throw .malformed(text, reason: "libcurl could not rebuild it")
        }
        self.normalized = normalized
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    /// `host:port`: the unit the per-host transfer cap and Retry-After back-off apply to.
    public var hostKey: String { "\(host):\(port)" }

    /// The cache key: SHA-256 of the whole normalised URL.
    public var cacheKey: CacheKey { CacheKey(url: self) }

    public var description: String { normalized }

    private static func part(_ handle: OpaquePointer, _ part: CURLUPart, flags: UInt32) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, part, &value, flags) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(cString: value)
    }
}

/// Why a string is not an acceptable image URL.
public enum ImageURLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing was given.
    case empty
    /// Longer than ``ImageURL/maximumLength``.
    case tooLong(length: Int, limit: Int)
    /// A scheme other than http or https (ftp, file, data, …).
    case unsupportedScheme(String)
    /// Not a URL libcurl can parse; `reason` is libcurl's or ours.
    case malformed(String, reason: String)

    public var description: String {
        switch self {
        case .empty: "empty URL"
        case .tooLong(let length, let limit): "URL is \(length) bytes long; the limit is \(limit)"
        case .unsupportedScheme(let scheme): "scheme '\(EchoedText.cut(scheme, limit: 64))' is not supported: only http and https URLs are fetched"
        case .malformed(_, let reason): "not a valid URL: \(reason)"
        }
    }
}
