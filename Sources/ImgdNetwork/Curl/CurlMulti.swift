import CCurlShim

/// libcurl's multi handle: many transfers driven by one thread.
///
/// Every method but ``wakeup`` must be called on the engine's loop thread, which created it and
/// tears it down (remove each easy handle, clean it up, then the multi handle), so no callback
/// ever runs on a thread that does not own its state.
final class CurlMulti {
    /// The `CURLM *`.
    let handle: UnsafeMutableRawPointer

    init() throws(CurlSetupError) {
        guard let handle = curl_multi_init() else { throw CurlSetupError(what: "curl_multi_init", code: -1) }
        self.handle = handle
    }

    deinit { curl_multi_cleanup(handle) }

    func set(_ option: CURLMoption, _ value: Int) {
        // Every option imgd sets exists in libcurl 7.88; an unknown one is harmless to skip.
        _ = imgd_multi_setopt_long(handle, option, value)
    }

    func add(_ easy: CurlEasy) -> Bool { curl_multi_add_handle(handle, easy.handle) == CURLM_OK }

    func remove(_ easy: CurlEasy) { curl_multi_remove_handle(handle, easy.handle) }

    /// Lets libcurl make progress on every transfer that can; returns how many still run.
    @discardableResult
    func perform() -> Int {
        var running: Int32 = 0
        curl_multi_perform(handle, &running)
        return Int(running)
    }

    /// Waits for activity on any transfer's socket, a wakeup, or `timeoutMilliseconds`.
    func poll(timeoutMilliseconds: Int) {
        curl_multi_poll(handle, nil, 0, Int32(clamping: timeoutMilliseconds), nil)
    }

    /// How long libcurl wants to wait at most before it is called again (nil: no timer set).
    func timeoutMilliseconds() -> Int? {
        var value = -1
        curl_multi_timeout(handle, &value)
        return value >= 0 ? value : nil
    }

    /// The next finished transfer: its easy handle and libcurl's result.
    func nextCompleted() -> (easy: UnsafeMutableRawPointer, result: CURLcode)? {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(handle, &remaining) {
            if message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle {
                return (easy, imgd_msg_result(message))
            }
        }
        return nil
    }

    /// A handle other threads may use to interrupt ``poll(timeoutMilliseconds:)``.
    var waker: CurlWaker { CurlWaker(handle: handle) }
}

/// Interrupts the loop thread's `curl_multi_poll` from any thread.
///
/// `@unchecked Sendable`: it only ever calls `curl_multi_wakeup`, which libcurl documents as
/// safe to call from any thread, and the engine keeps the multi handle alive until its loop has
/// ended and no more wakeups can be sent.
struct CurlWaker: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    func wakeup() { curl_multi_wakeup(handle) }
}
