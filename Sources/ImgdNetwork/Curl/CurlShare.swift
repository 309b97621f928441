import CCurlShim

/// libcurl's share object: state that outlives one easy handle, here the TLS session cache.
///
/// Easy handles are made fresh for every transfer (see ``CurlEasy``), and a TLS session cache
/// lives in the easy handle unless it is shared; without this, every new TLS connection would
/// make a full handshake instead of resuming. Connections and the DNS cache already live in the
/// multi handle.
///
/// Owned by the engine's loop thread, the only thread that uses it or any handle attached to it,
/// so it installs no lock callbacks. It must outlive every easy handle attached to it.
final class CurlShare {
    /// The `CURLSH *`.
    let handle: UnsafeMutableRawPointer

    init() throws(CurlSetupError) {
        guard let handle = curl_share_init() else { throw CurlSetupError(what: "curl_share_init", code: -1) }
        self.handle = handle
        let code = imgd_share_setopt_long(handle, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
        guard code == CURLSHE_OK else {
            curl_share_cleanup(handle)
            throw CurlSetupError(what: "curl_share_setopt(CURLSHOPT_SHARE)", code: -1)
        }
    }

    deinit { curl_share_cleanup(handle) }
}
