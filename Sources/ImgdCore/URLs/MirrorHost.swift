import CCurlShim
import ImgdBase

/// A host that mirrors another (a host table's `mirrors = ["b.example", "c.example:8443"]`):
/// every URL of the table's hosts is also found on it, with the same scheme, path and query, on
/// the URL's own port unless the mirror names one.
public struct MirrorHost: Sendable, Hashable, CustomStringConvertible {
    /// The host, lower-cased (an IPv6 literal keeps its brackets).
    public let host: String
    /// The port it names; nil: the mirrored URL's own.
    public let port: Int?

    /// Parses `host` or `host:port` (no scheme, path, user or query). Throws the reason.
    public init(_ text: String) throws(ImageURLError) {
        guard !text.isEmpty else { throw .empty }
        guard text.utf8.count <= 300,
            !text.utf8.contains(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "@") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") })
        else {
            throw .malformed(text, reason: "a mirror host is written host or host:port (no scheme, path, user or query; at most 300 bytes)")
        }
        let url = try ImageURL("http://\(text)/")
        host = url.host
        // Whether a port was written: the text ends in ":digits" after the host (a bracketed IPv6
        // literal's own colons are inside its brackets).
        let afterHost = text.lowercased().dropFirst(url.host.count)
        if afterHost.first == ":" {
            guard let written = Int(afterHost.dropFirst()), (1...65535).contains(written) else {
                throw .malformed(text, reason: "the port is not a number from 1 to 65535")
            }
            port = written
        } else {
            guard afterHost.isEmpty else { throw .malformed(text, reason: "not a host or host:port") }
            port = nil
        }
    }

    public var description: String { port.map { "\(host):\($0)" } ?? host }
}

extension ImageURL {
    /// This URL on `mirror`: the same scheme, path and query, the mirror's host, and its port
    /// (this URL's when it names none). Nil when libcurl cannot rebuild it.
    public func onMirror(_ mirror: MirrorHost) -> ImageURL? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        let port = String(mirror.port ?? self.port)
        guard curl_url_set(handle, CURLUPART_URL, normalized, 0) == CURLUE_OK,
            curl_url_set(handle, CURLUPART_HOST, mirror.host, 0) == CURLUE_OK,
            curl_url_set(handle, CURLUPART_PORT, port, 0) == CURLUE_OK
        else { return nil }
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_URL, &value, 0) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return try? ImageURL(String(cString: value))
    }
}
