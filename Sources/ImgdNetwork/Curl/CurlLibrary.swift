import CCurlShim

/// libcurl's process-wide state: `curl_global_init` exactly once, before the first handle.
enum CurlLibrary {
    /// Swift runs a static `let` initialiser once, thread-safely: that is the "once".
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// Initialises libcurl if that has not happened yet; false if libcurl refused.
    static func initialize() -> Bool { initialized }
}
