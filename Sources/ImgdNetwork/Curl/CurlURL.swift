import CCurlShim

/// libcurl's URL API, for reading a URL the way libcurl itself reads it before a request.
enum CurlURL {
    /// The host of `url` as libcurl uses it: odd IPv4 spellings normalised (`0x7f.1` becomes
    /// `127.0.0.1`), IPv6 literals in brackets without their zone id. nil when libcurl cannot
    /// parse the URL (then it cannot fetch it either).
    static func host(of url: String) -> String? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        // The flags libcurl itself parses CURLOPT_URL with.
        guard curl_url_set(handle, CURLUPART_URL, url, UInt32(CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK
        else { return nil }
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_HOST, &value, 0) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(cString: value)
    }
}

extension CurlURL {
    /// A redirect's `Location` (absolute, or a reference relative to `base`) resolved against
    /// `base` the way libcurl resolves it when it follows a redirect itself: spaces and bytes
    /// over 0x7F percent-encoded, any scheme parsed (so that the caller can refuse it by name).
    /// nil when libcurl cannot parse it.
    static func resolve(_ location: String, against base: String) -> String? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, base, 0) == CURLUE_OK,
            curl_url_set(
                handle, CURLUPART_URL, location,
                UInt32(CURLU_URLENCODE | CURLU_ALLOW_SPACE | CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK
        else { return nil }
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_URL, &value, 0) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(cString: value)
    }
}

extension CurlURL {
    /// A URL as libcurl parsed it, whose parts are read on demand; the handle goes with it.
    final class Parsed {
        private let handle: OpaquePointer

        /// `text` parsed with `flags` (`CURLU_…`), or why libcurl refused it.
        static func parse(_ text: String, flags: UInt32 = 0) -> Result<Parsed, ParseFailure> {
            guard let handle = curl_url() else { return .failure(ParseFailure(reason: "libcurl could not allocate a URL handle")) }
            let code = curl_url_set(handle, CURLUPART_URL, text, flags)
            guard code == CURLUE_OK else {
                curl_url_cleanup(handle)
                return .failure(ParseFailure(reason: String(cString: curl_url_strerror(code))))
            }
            return .success(Parsed(handle))
        }

        private init(_ handle: OpaquePointer) {
            self.handle = handle
        }

        deinit { curl_url_cleanup(handle) }

        /// The part (`CURLUPART_SCHEME`, `…_HOST`, …), or nil when the URL has none.
        func part(_ part: CURLUPart) -> String? {
            var value: UnsafeMutablePointer<CChar>?
            guard curl_url_get(handle, part, &value, 0) == CURLUE_OK, let value else { return nil }
            defer { curl_free(value) }
            return String(cString: value)
        }
    }

    /// Why libcurl refused a URL, in its own words.
    struct ParseFailure: Error {
        let reason: String
    }
}
