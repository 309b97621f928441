import CCurlShim
import ImgdCore
import ImgdStore

#if canImport(Glibc)
import Glibc
#endif

/// One attempt at downloading one job's URL: its easy handle, its body, and what its callbacks
/// observed. Lives on the engine's loop thread from start to completion.
///
/// The body is gathered in a buffer of at most ``bufferLimit`` bytes; whenever the buffer fills,
/// it is handed to a ``BodySpill`` (written and hashed on a spill lane, off this thread), so
/// memory stays bounded whatever the size. Most images are smaller than the buffer: the
/// publisher validates them in memory and writes their file only if they pass — an error page
/// never touches the disk.
///
/// libcurl's C callbacks receive it through their userdata pointer (`Unmanaged`, unretained:
/// the engine's table of running transfers keeps it alive while libcurl may call back).
final class Transfer {
    /// Why the transfer stopped itself (a callback returned an error to libcurl).
    enum Abort {
        case tooLarge(limit: Int)
        case notImage
        case disk(StoreError)
        case diskFull(needed: Int)
        case policyDenied(String)
    }

    let job: Job
    /// Unique per engine: tells this transfer from another of the same job (a retry, a restart).
    let serial: UInt64
    let easy: CurlEasy
    let startedAt: ContinuousClock.Instant
    /// Where the body goes once it outgrows the buffer.
    private(set) var spill: BodySpill?
    /// Body bytes handed to `spill`.
    private var spilledBytes = 0
    /// Body bytes not yet handed to `spill`.
    private(set) var buffer: [UInt8] = []
    /// Makes the spill for a body that outgrows the buffer.
    private let makeSpill: (CacheKey) -> BodySpill
    /// Space held against the cache's cap for this body.
    let reservation: SpaceReservation
    /// Asks the cache for room for this transfer (bytes wanted); the engine posts the request
    /// and calls ``roomAnswered(granted:bytes:)`` with the answer. Runs inside the write callback.
    private let askForRoom: (Transfer, Int) -> Void
    /// Where the transfer stands with the cache's room: receiving is paused while a request is
    /// out, and a refusal fails the body at its next bytes.
    private(set) var room = RoomState.unasked
    /// The Content-Length, read with the first body bytes (nil: not declared).
    private(set) var declaredLength: Int?
    /// When the first byte of a 2xx body arrived (the pace is judged from then).
    private(set) var bodyStartedAt: ContinuousClock.Instant?

    private let maxBodyBytes: Int
    /// The whole attempt's limit under the policy it started with (a reload does not shorten it).
    let totalTimeout: Duration
    private let addresses: AddressPolicy
    /// Until the format has been recognised from the first bytes.
    private var isSniffing = true
    /// Status of the response delivering the body; read on the first body bytes.
    private var status: Int?
    /// Body bytes of an error response are counted and dropped, never written.
    private var discardedBytes = 0
    private(set) var abort: Abort?

    /// A transfer's dealings with the cache for room beyond its free share of the cap.
    enum RoomState {
        /// Every byte so far fit in free space, or the last request was granted.
        case unasked
        /// A request is out; receiving is paused (libcurl keeps the bytes it offered).
        case waiting
        /// The cache could not make room: the body does not fit.
        case refused
    }
    /// libcurl's detailed message for the failure, if any.
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)

    /// Bytes of an error page read before the transfer is cut short.
    static let maxDiscardedBytes = 64 * 1024
    /// Bytes looked at before giving up on an early verdict (the full check still runs at the end).
    static let maxSniffBytes = 4096
    /// Body bytes held in memory before they are written out.
    static let bufferLimit = 64 * 1024
    /// The buffer's first size for a body of undeclared length.
    static let undeclaredStart = 16 * 1024

    init(
        job: Job, serial: UInt64, easy: CurlEasy, disk: DiskCache, policy: DownloadPolicy,
        askForRoom: @escaping (Transfer, Int) -> Void, makeSpill: @escaping (CacheKey) -> BodySpill
    ) {
        self.makeSpill = makeSpill
        self.askForRoom = askForRoom
        self.job = job
        self.serial = serial
        self.easy = easy
        self.reservation = SpaceReservation(budget: disk.budget)
        self.maxBodyBytes = policy.maxBodyBytes
        self.totalTimeout = policy.totalTimeout
        self.addresses = policy.addresses
        self.startedAt = .now
        errorBuffer.initialize(to: 0)
    }

    deinit {
        // libcurl keeps the pointer until the handle is cleaned up, which happens after this
        // (the handle is a stored property): take it back first.
        try? easy.set(CURLOPT_ERRORBUFFER, pointer: nil)
        errorBuffer.deallocate()
    }

    /// Body bytes received so far.
    var bytesReceived: Int { spilledBytes + buffer.count }

    /// libcurl's message for the failure, or "".
    var errorDetail: String { String(cString: errorBuffer) }

    /// Applies imgd's policy to the transfer's fresh easy handle.
    func configure(_ policy: DownloadPolicy) throws(CurlSetupError) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        try easy.set(CURLOPT_URL, job.url.normalized)
        try easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        try easy.set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        try easy.set(CURLOPT_FOLLOWLOCATION, true)
        try easy.set(CURLOPT_MAXREDIRS, policy.maxRedirects)
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, policy.connectTimeout.milliseconds)
        try easy.set(CURLOPT_TIMEOUT_MS, policy.totalTimeout.milliseconds)
        try easy.set(CURLOPT_LOW_SPEED_LIMIT, policy.lowSpeedLimit)
        try easy.set(CURLOPT_LOW_SPEED_TIME, max(1, Int(policy.lowSpeedTime.components.seconds)))
        // Rejects a declared Content-Length over the cap before any byte is read; bodies
        // without one are counted in `receive`.
        try easy.set(CURLOPT_MAXFILESIZE_LARGE, offset: Int64(policy.maxBodyBytes))
        // An empty proxy disables the *_proxy environment variables: a proxy is used only when
        // configured. No cookie engine, no .netrc, and no Accept-Encoding: images are already
        // compressed, and inflating would turn a small gzip bomb into a huge body.
        try easy.set(CURLOPT_PROXY, policy.proxy ?? "")
        try easy.set(CURLOPT_NETRC, Int(CURL_NETRC_IGNORED.rawValue))
        try easy.set(CURLOPT_USERAGENT, policy.userAgent)
        try easy.set(headers: RequestHeaders(validators: job.validators))
        try easy.set(CURLOPT_NOSIGNAL, true)
        // Waiting to multiplex pays only over TLS, where ALPN answers during the handshake. Over
        // plain http a new host's answer comes with its first response: every other transfer to
        // it would wait for that (a slow or stalled first image holds back the whole host).
        try easy.set(CURLOPT_PIPEWAIT, job.url.scheme == "https")
        // A private CA's certificates replace the system's store for this transfer; without a
        // file libcurl uses the store it was built with (Debian: /etc/ssl/certs).
        if let caFile = policy.caFile { try easy.set(CURLOPT_CAINFO, caFile) }
        try easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
        try easy.set(CURLOPT_WRITEFUNCTION, write: transferWriteCallback)
        try easy.set(CURLOPT_WRITEDATA, pointer: me)
        try easy.set(CURLOPT_OPENSOCKETFUNCTION, openSocket: transferOpenSocketCallback)
        try easy.set(CURLOPT_OPENSOCKETDATA, pointer: me)
        // The address policy for the URL about to be requested (the job's or a redirect's), before
        // each request, reused connection or not: with a proxy, the peer `mayConnect` sees is the
        // proxy, never the target.
        try easy.set(CURLOPT_PREREQFUNCTION, prereq: transferPrereqCallback)
        try easy.set(CURLOPT_PREREQDATA, pointer: me)
    }

    /// Body bytes from libcurl. Returns how many were taken; anything else makes libcurl stop
    /// the transfer with CURLE_WRITE_ERROR, after `abort` says why.
    func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        if status == nil {
            status = easy.info(long: CURLINFO_RESPONSE_CODE) ?? 0
            if let length = easy.info(offset: CURLINFO_CONTENT_LENGTH_DOWNLOAD_T), length >= 0 {
                declaredLength = Int(length)
            }
        }
        guard let status, (200..<300).contains(status) else {
            discardedBytes += bytes.count
            return discardedBytes > Self.maxDiscardedBytes ? 0 : bytes.count
        }
        if bodyStartedAt == nil { bodyStartedAt = .now }
        if let failure = spill?.failure {
            abort = .disk(failure)
            return 0
        }
        guard bytesReceived + bytes.count <= maxBodyBytes else {
            abort = .tooLarge(limit: maxBodyBytes)
            return 0
        }
        // The cap is hard: the declared size is held before the first byte is kept, an
        // undeclared body is held chunk by chunk as it grows. Space that is not free is asked of
        // the cache, which evicts on its own queue; these bytes wait in libcurl meanwhile.
        let needed = max(declaredLength ?? 0, bytesReceived + bytes.count)
        if case .refused = room {
            abort = .diskFull(needed: needed)
            return 0
        }
        let wanted = reservation.shortfall(holding: needed, declared: declaredLength != nil && needed == declaredLength)
        if wanted > 0 {
            room = .waiting
            askForRoom(self, wanted)
            return CurlEasy.pauseWriting
        }
        if buffer.capacity == 0 {
            // As much as the body needs when its length is declared (most images are far
            // smaller than the buffer), else a start that grows by doubling.
            buffer.reserveCapacity(min(Self.bufferLimit, maxBodyBytes, declaredLength ?? Self.undeclaredStart))
        }
        buffer.append(contentsOf: bytes)
        if isSniffing, spill == nil {
            let verdict = buffer.withUnsafeBytes { all in
                ImageValidator.sniff(UnsafeRawBufferPointer(rebasing: all.prefix(Self.maxSniffBytes)), isComplete: false)
            }
            switch verdict {
            case .notImage:
                abort = .notImage
                return 0
            case .image:
                isSniffing = false
            case .needMoreBytes:
                if buffer.count >= Self.maxSniffBytes { isSniffing = false }
            }
        }
        if buffer.count >= Self.bufferLimit { spillBuffer() }
        return bytes.count
    }

    /// The cache's answer to a request for room: `bytes` granted (now held for this body) or
    /// refused. Receiving goes on either way — with the bytes libcurl kept, which then fit, or
    /// fail as `disk_full`.
    func roomAnswered(granted: Bool, bytes: Int) {
        guard case .waiting = room else { return }
        if granted {
            reservation.adopt(bytes)
            room = .unasked
        } else {
            room = .refused
        }
        easy.resumeReceiving()
    }

    /// Hands the full buffer to the spill (made with the first one) and starts a new one. The
    /// buffer is moved, not copied: the spill's lane holds the only reference.
    private func spillBuffer() {
        let spill = self.spill ?? makeSpill(job.key)
        self.spill = spill
        spilledBytes += buffer.count
        let full = buffer
        buffer = []
        spill.append(full)
        let left = (declaredLength ?? maxBodyBytes) - spilledBytes
        buffer.reserveCapacity(max(1, min(Self.bufferLimit, left)))
    }

    /// Removes the temp file, if there is one, and gives back the space held.
    func discard() {
        spill?.discard()
        reservation.release()
    }

    /// Decides whether to let libcurl connect to `address`: not when the URL the connection is
    /// for has a refused literal host (with a proxy, `address` is the proxy's, and an https
    /// target's CONNECT goes out on the new connection before any request), nor when `address`
    /// itself is refused.
    func mayConnect(to address: UnsafePointer<curl_sockaddr>) -> Bool {
        guard mayRequest() else { return false }
        var raw = [UInt8](repeating: 0, count: 16)
        guard imgd_curl_sockaddr_to_ipv6(address, &raw) == 1 else { return true }
        let peer = raw.withUnsafeBytes { IPRange.Address(bytes: $0) }
        guard let refusal = addresses.refusal(of: peer) else { return true }
        abort = .policyDenied("connecting to \(peer) is refused: \(refusal)")
        return false
    }

    /// Decides whether libcurl may send a request for the URL it is about to fetch (the job's URL
    /// or a redirect target, which libcurl makes the effective URL before connecting for it): not
    /// when its host is a literal address the policy refuses.
    func mayRequest() -> Bool {
        // The job's own URL was checked before the transfer started (by the same policy); only
        // a redirect target needs parsing here, which spares every ordinary request a URL parse.
        guard let url = easy.info(string: CURLINFO_EFFECTIVE_URL), url != job.url.normalized,
            let host = CurlURL.host(of: url),
            let reason = addresses.requestRefusal(url: url, host: host, isRedirect: true)
        else { return true }
        abort = .policyDenied(reason)
        return false
    }

}

/// `CURLOPT_WRITEFUNCTION`: capture-free, so it can be a C function pointer.
private let transferWriteCallback: imgd_curl_write_callback = { data, size, count, userdata in
    guard let userdata else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    return transfer.receive(UnsafeRawBufferPointer(start: data, count: size * count))
}

/// `CURLOPT_OPENSOCKETFUNCTION`: the address policy, applied to every connection attempt.
private let transferOpenSocketCallback: imgd_curl_opensocket_callback = { clientp, _, address in
    guard let clientp, let address else { return CURL_SOCKET_BAD }
    let transfer = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
    guard transfer.mayConnect(to: address) else { return CURL_SOCKET_BAD }
    return imgd_curl_open_socket(address)
}

/// `CURLOPT_PREREQFUNCTION`: the address policy for the URL, before each request is sent.
private let transferPrereqCallback: imgd_curl_prereq_callback = { clientp, _, _, _, _ in
    guard let clientp else { return CURL_PREREQFUNC_ABORT }
    let transfer = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
    return transfer.mayRequest() ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT
}

extension Duration {
    /// Whole milliseconds, for libcurl's `_MS` options.
    var milliseconds: Int {
        let parts = components
        return Int(parts.seconds) * 1000 + Int(parts.attoseconds / 1_000_000_000_000_000)
    }
}
