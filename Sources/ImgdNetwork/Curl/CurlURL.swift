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
