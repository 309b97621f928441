import CCurlShim

/// A `curl_slist` of request header lines, owned: freed when the last reference goes. The easy
/// handle that was given it keeps a reference (``CurlEasy/set(headers:)``), so the list lives
/// until the handle is cleaned up, as libcurl requires.
final class CurlHeaderList {
    private(set) var list: UnsafeMutablePointer<curl_slist>?

    init(_ headers: RequestHeaders) {
        for line in headers.lines {
            // curl_slist_append returns NULL (and leaves the list) when out of memory: keep what
            // was built.
            guard let longer = curl_slist_append(list, line) else { break }
            list = longer
        }
    }

    deinit { curl_slist_free_all(list) }
}
