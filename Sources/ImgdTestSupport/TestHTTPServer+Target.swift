extension TestHTTPServer {
    /// A request-target split into its path and its query parameters.
    ///
    /// The server parses targets itself rather than through Foundation's `URLComponents`, so the
    /// rules are exactly these: parameters are separated by `&`, a name without `=` has the value
    /// `""`, the last occurrence of a name wins, and values are percent-decoded (`+` stays a plus,
    /// because tests percent-encode whole URLs and a literal `+` must survive).
    ///
    /// A request to a proxy names the whole URL (absolute form, `http://host:port/path?query`);
    /// the server routes it by its path and query all the same, so it can play the proxy for a
    /// test (the request log keeps the target as received).
    struct Target: Sendable, Equatable {
        /// The path, up to the first `?`, not decoded.
        var path: String
        /// Decoded query parameters.
        var query: [String: String]

        init(_ target: String) {
            let pathAndQuery = Self.originForm(target)
            guard let mark = pathAndQuery.firstIndex(of: "?") else {
                path = pathAndQuery
                query = [:]
                return
            }
            path = String(pathAndQuery[..<mark])
            var query: [String: String] = [:]
            for pair in pathAndQuery[pathAndQuery.index(after: mark)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = Self.percentDecoded(parts[0])
                query[name] = parts.count > 1 ? Self.percentDecoded(parts[1]) : ""
            }
            self.query = query
        }

        /// A query parameter whose value the server cannot use; the request is answered 400.
        struct Invalid: Error, Sendable, Equatable {
            var name: String
            var value: String
        }

        /// The integer parameter `name`, or `default` when absent. A value that is not an integer or
        /// lies outside `range` is an error: every input a test controls has a limit.
        func integer(_ name: String, default: Int? = nil, in range: ClosedRange<Int>) throws(Invalid) -> Int? {
            guard let text = query[name] else { return `default` }
            guard let value = Int(text), range.contains(value) else { throw Invalid(name: name, value: text) }
            return value
        }

        /// The parameter `name` as a header value. CR and LF are refused, so a test cannot split a
        /// head; they are checked as bytes because "\r\n" is a single `Character`.
        func headerValue(_ name: String) throws(Invalid) -> String? {
            guard let text = query[name] else { return nil }
            guard !text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A }) else {
                throw Invalid(name: name, value: text)
            }
            return text
        }

        /// Whether a flag parameter (`no_cl=1`) is set; `0`, `false` and absence mean no.
        func flag(_ name: String) -> Bool {
            guard let text = query[name] else { return false }
            return text != "0" && text != "false"
        }

        /// `/path?query` of an absolute-form target (`http://host/path?query`, `/` when it has no
        /// path); any other target as it is.
        static func originForm(_ target: String) -> String {
            guard let scheme = target.range(of: "://"), !target[..<scheme.lowerBound].contains("/") else { return target }
            let authorityAndRest = target[scheme.upperBound...]
            guard let slash = authorityAndRest.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return "/" }
            let rest = authorityAndRest[slash...]
            return rest.hasPrefix("?") ? "/" + rest : String(rest)
        }

        /// Decodes `%XX` escapes; a malformed escape is kept as it is (a test server should show the
        /// client's mistake to the test, not hide it).
        static func percentDecoded(_ text: Substring) -> String {
            guard text.contains("%") else { return String(text) }
            let bytes = Array(text.utf8)
            var out: [UInt8] = []
            out.reserveCapacity(bytes.count)
            var index = 0
            while index < bytes.count {
                if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                    let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
                {
                    out.append(high << 4 | low)
                    index += 3
                } else {
                    out.append(bytes[index])
                    index += 1
                }
            }
            return String(decoding: out, as: UTF8.self)
        }

        private static func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
    }
}
