import CCurlShim

/// One libcurl easy handle with typed option setters and info getters.
///
/// Owned by the transfer engine's loop thread; never shared, so not `Sendable`.
///
/// One handle serves one transfer and is then cleaned up, whatever the outcome: nothing one
/// transfer leaves in a handle (a receive buffer still allocated after a failure before
/// connecting, an HTTP/2 stream's state) can reach the next. Reusing handles saved about 2 µs
/// per transfer; it cost every download after the first failed name lookup, because libcurl
/// 7.88 refuses `CURLOPT_BUFFERSIZE` on a handle whose buffer is still allocated. What is worth
/// keeping between transfers lives elsewhere: connections and the DNS cache in the multi
/// handle, TLS sessions in the ``CurlShare``.
final class CurlEasy {
    /// The `CURL *` (libcurl's `typedef void CURL`).
    let handle: UnsafeMutableRawPointer
    /// Kept alive as long as this handle is attached to it.
    private let share: CurlShare?

    /// Receive buffer size: the write callback gets up to this much at once (libcurl's default
    /// is 16 KiB). Set once, on the fresh handle, the only time libcurl always accepts it.
    static let receiveBufferBytes = 64 * 1024

    /// A fresh handle, attached to `share`, with the options that may only be set before its
    /// first transfer.
    init(share: CurlShare?) throws(CurlSetupError) {
        guard let handle = curl_easy_init() else { throw CurlSetupError(what: "curl_easy_init", code: -1) }
        self.handle = handle
        self.share = share
        try set(CURLOPT_BUFFERSIZE, Self.receiveBufferBytes)
        if let share { try check(imgd_easy_setopt_share(handle, CURLOPT_SHARE, share.handle), CURLOPT_SHARE) }
    }

    deinit { curl_easy_cleanup(handle) }

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

    /// What a write callback returns to pause receiving: libcurl keeps the bytes it offered
    /// and offers them again after ``resumeReceiving()``.
    static let pauseWriting = Int(CURL_WRITEFUNC_PAUSE)

    /// Lets a transfer paused by ``pauseWriting`` go on; libcurl may call the write callback from
    /// inside this call. False if libcurl refused (the transfer then fails on its own).
    @discardableResult
    func resumeReceiving() -> Bool {
        curl_easy_pause(handle, CURLPAUSE_CONT) == CURLE_OK
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
