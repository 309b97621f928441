import CCurlShim

/// A `curl_slist` of request header lines for `CURLOPT_HTTPHEADER`, freed with this object.
///
/// libcurl keeps the list's pointer (it does not copy the list), so it must outlive the
/// handle's use of it: the owning transfer keeps it, and takes the option back before freeing.
final class CurlHeaderList {
    private(set) var list: UnsafeMutablePointer<curl_slist>?

    /// A list of `lines` (`Name: value`); nil when libcurl cannot allocate it.
    init?(_ lines: [String]) {
        for line in lines {
            guard let next = curl_slist_append(list, line) else {
                curl_slist_free_all(list)
                return nil
            }
            list = next
        }
    }

    deinit { curl_slist_free_all(list) }
}
