import NIOHTTP1

/// An image request made over HTTP: the URL and `get`'s options, as the query of `/image` or the
/// `X-Imgd-*` headers of the path form give them. Turned into a `get` by the face, so both
/// faces share one lookup, one set of counters and one set of limits.
struct ImageQuery: Sendable, Equatable {
    var url: String
    var key: String?
    var sha256: String?
    var fetch = true
    var refresh: String?

    /// The options in `get`'s terms (Protocol.md, *get*).
    var arguments: [(String, String)] {
        [("key", key), ("sha256", sha256), ("refresh", refresh)].compactMap { name, value in value.map { (name, $0) } }
    }

    /// `/image`'s query: `url` (required), `key`, `sha256`, `fetch` (`0`/`1`, `false`/`true`),
    /// `refresh`; each at most once, each value percent-decoded. `+` stays `+` (RFC 3986: signed
    /// URLs carry it, and a form's space is not meant here). Unknown parameters are ignored, as
    /// the control protocol ignores unknown members, so newer clients work with older daemons.
    static func parse(query: Substring) -> Result<ImageQuery, HTTPFaceError> {
        var values: [String: String] = [:]
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let name: Substring, raw: Substring
            if let equals = pair.firstIndex(of: "=") {
                name = pair[..<equals]
                raw = pair[pair.index(after: equals)...]
            } else {
                name = pair
                raw = ""
            }
            guard ["url", "key", "sha256", "fetch", "refresh"].contains(name) else { continue }
            guard values[String(name)] == nil else {
                return .failure(.badRequest("the parameter \(name) is given twice"))
            }
            guard let value = PercentDecoding.decode(raw) else {
                return .failure(.badRequest("the parameter \(name) has a bad percent escape or is not UTF-8"))
            }
            values[String(name)] = value
        }
        guard let url = values["url"], !url.isEmpty else {
            return .failure(.badRequest("/image needs url=<percent-encoded URL>"))
        }
        var query = ImageQuery(url: url, key: values["key"], sha256: values["sha256"], refresh: values["refresh"])
        if let fetch = values["fetch"] {
            switch fetch {
            case "0", "false": query.fetch = false
            case "1", "true": query.fetch = true
            default: return .failure(.badRequest("fetch must be 0 or 1, not \(HTTPFaceRoute.quoted(fetch))"))
            }
        }
        return .success(query)
    }

    /// The path form, `/<scheme>/<authority>/<path>[?query]`: the target after `/<scheme>/`,
    /// untouched (its escapes and its query belong to the origin), prefixed `scheme://`, is the
    /// URL, as the fleet tier writes it. The options come as headers: `X-Imgd-Key`,
    /// `X-Imgd-SHA256`, `X-Imgd-Fetch`, `X-Imgd-Refresh`.
    static func pathForm(scheme: String, rest: Substring, headers: HTTPHeaders) -> Result<ImageQuery, HTTPFaceError> {
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.isEmpty else { return .failure(.badURL("the path form needs a host: /\(scheme)/HOST/PATH")) }
        // User information would be the origin's credentials, or a trick to hide the host.
        guard !authority.contains("@") else {
            return .failure(.badURL("the path form's host must not carry user information (@)"))
        }
        var query = ImageQuery(url: scheme + "://" + rest)
        for (field, name) in [("key", "X-Imgd-Key"), ("sha256", "X-Imgd-SHA256"), ("refresh", "X-Imgd-Refresh"), ("fetch", "X-Imgd-Fetch")] {
            let given = headers[name]
            guard given.count <= 1 else { return .failure(.badRequest("the header \(name) is given twice")) }
            guard let value = given.first else { continue }
            switch field {
            case "key": query.key = value
            case "sha256": query.sha256 = value
            case "refresh": query.refresh = value
            default:
                switch value {
                case "0", "false": query.fetch = false
                case "1", "true": query.fetch = true
                default: return .failure(.badRequest("X-Imgd-Fetch must be 0 or 1, not \(HTTPFaceRoute.quoted(value))"))
                }
            }
        }
        return .success(query)
    }
}
