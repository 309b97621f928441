import CCurlShim

/// One libcurl easy handle with typed option setters and info getters.
///
/// Owned by the transfer engine's loop thread; never shared, so not `Sendable`. Handles are
/// reset and reused between transfers to save allocations.
final class CurlEasy {
    /// The `CURL *` (libcurl's `typedef void CURL`).
    let handle: UnsafeMutableRawPointer

    init() throws(CurlSetupError) {
        guard let handle = curl_easy_init() else { throw CurlSetupError(what: "curl_easy_init", code: -1) }
        self.handle = handle
    }

    deinit { curl_easy_cleanup(handle) }

    /// Clears every option, keeping connections and caches.
    func reset() { curl_easy_reset(handle) }

    func set(_ option: CURLoption, _ value: Int) throws(CurlSetupError) {
        try check(imgd_easy_setopt_long(handle, option, value), option)
    }

    func set(_ option: CURLoption, _ value: Bool) throws(CurlSetupError) {
        try set(option, value ? 1 : 0)
    }

    func set(_ option: CURLoption, offset value: Int64) throws(CurlSetupError) {
        try check(imgd_easy_setopt_off_t(handle, option, curl_off_t(value)), option)
    }

    /// libcurl copies strings it is given, so a temporary C string is enough.
    func set(_ option: CURLoption, _ value: String) throws(CurlSetupError) {
        try check(imgd_easy_setopt_string(handle, option, value), option)
    }

    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) throws(CurlSetupError) {
        try check(imgd_easy_setopt_pointer(handle, option, value), option)
    }

    func set(_ option: CURLoption, write value: imgd_curl_write_callback) throws(CurlSetupError) {
        try check(imgd_easy_setopt_write_callback(handle, option, value), option)
    }

    func set(_ option: CURLoption, openSocket value: imgd_curl_opensocket_callback) throws(CurlSetupError) {
        try check(imgd_easy_setopt_opensocket_callback(handle, option, value), option)
    }

    func set(_ option: CURLoption, prereq value: imgd_curl_prereq_callback) throws(CurlSetupError) {
        try check(imgd_easy_setopt_prereq_callback(handle, option, value), option)
    }

    func info(long info: CURLINFO) -> Int? {
        var value = 0
        return imgd_easy_getinfo_long(handle, info, &value) == CURLE_OK ? value : nil
    }

    func info(offset info: CURLINFO) -> Int64? {
        var value: curl_off_t = 0
        return imgd_easy_getinfo_off_t(handle, info, &value) == CURLE_OK ? Int64(value) : nil
    }

    func info(string info: CURLINFO) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard imgd_easy_getinfo_string(handle, info, &value) == CURLE_OK, let value else { return nil }
        return String(cString: value)
    }

    /// The last value of response header `name` of the final request (after redirects).
    func header(_ name: String) -> String? {
        var header: UnsafeMutablePointer<curl_header>?
        guard curl_easy_header(handle, name, 0, UInt32(CURLH_HEADER), -1, &header) == CURLHE_OK,
            let value = header?.pointee.value
        else { return nil }
        return String(cString: value)
    }

    private func check(_ code: CURLcode, _ option: CURLoption) throws(CurlSetupError) {
        guard code == CURLE_OK else {
            throw CurlSetupError(what: "curl_easy_setopt(\(option.rawValue))", code: Int(code.rawValue))
        }
    }
}

/// libcurl refused a handle or an option: a build or version problem, not a network failure.
public struct CurlSetupError: Error, CustomStringConvertible {
    /// The call that failed.
    public let what: String
    /// libcurl's code (-1: it returned no handle).
    public let code: Int

    public var description: String {
        let reason = code >= 0 ? String(cString: curl_easy_strerror(CURLcode(UInt32(code)))) : "out of memory"
        return "\(what) failed: \(reason)"
    }
}
