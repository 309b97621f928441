import CCurlShim
import ImgdCore
import ImgdStore

#if canImport(Glibc)
import Glibc
#endif

/// One request of an attempt at downloading one job's URL — the job's URL itself or a redirect's
/// target (libcurl follows no redirect: the engine takes each hop) — with its easy handle, its
/// body, and what its callbacks observed. Lives on the engine's loop thread from start to
/// completion.
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
    /// The URL this request fetches: the job's, or the target of the redirect it follows.
    let target: ImageURL
    /// Redirects followed in this attempt before this request (0 for the job's own URL).
    let redirects: Int
    /// The tier this request goes through, nil when it goes to the origin directly (a fallback,
    /// a URL with user info, a host with headers of its own).
    let tier: TierRoute?
    /// What is requested: the tier's URL for ``target`` through a tier, else ``target`` itself.
    let requestURL: String
    /// Unique per engine: tells this transfer from another of the same job (a retry, a restart).
    let serial: UInt64
    let easy: CurlEasy
    /// When the attempt began: a redirect's request keeps its first request's start, so that the
    /// whole chain has ``totalTimeout``, as one request has.
    let startedAt: ContinuousClock.Instant
    /// Where the body goes once it outgrows the buffer.
    private(set) var spill: BodySpill?
    /// Body bytes handed to `spill`.
    private var spilledBytes = 0
    /// Body bytes not yet handed to `spill`.
    private(set) var buffer: [UInt8] = []
    /// Makes the spill for a body that outgrows the buffer.
    private let makeSpill: (CacheKey, Int?) -> BodySpill
    /// Space held against the cache's cap for this body.
    let reservation: SpaceReservation
    /// Asks the cache for room for this transfer (bytes wanted); the engine posts the request
    /// and calls ``roomAnswered(granted:bytes:)`` with the answer. Runs inside the write callback.
    private let askForRoom: (Transfer, Int) -> Void
    /// Where the transfer stands with the cache's room: receiving is paused while a request is
    /// out, and a refusal fails the body at its next bytes.
    private(set) var room = RoomState.unasked
    /// Asks `max-rate`'s bucket whether bytes may be taken now (false: pause). Runs inside the
    /// write callback.
    private let admit: (Transfer, Int) -> Bool
    /// Where the transfer stands with `max-rate`: paused for it, and the time held back.
    var throttle = TransferThrottle()
    /// The Content-Length, read with the first body bytes (nil: not declared).
    private(set) var declaredLength: Int?
    /// When the first byte of a 2xx body arrived (the pace is judged from then).
    private(set) var bodyStartedAt: ContinuousClock.Instant?

    private let maxBodyBytes: Int
    /// The whole attempt's limit under the policy it started with (a reload does not shorten it).
    let totalTimeout: Duration
    private let addresses: AddressPolicy
    /// Until the format has been recognised from the first bytes (or ``maxSniffBytes`` have
    /// arrived without a verdict).
    private var isSniffing = true
    /// Set once the first bytes were recognised as an image: only then is room held for a
    /// declared length. Until then only what has arrived is held, so a hostile origin that
    /// declares a large length and sends an error page evicts nothing.
    private var passedSniff = false
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
    /// The request's configured header lines (its target host's), while libcurl may read them.
    private var headers: CurlHeaderList?
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
        job: Job, target: ImageURL, redirects: Int, direct: Bool, attemptStartedAt: ContinuousClock.Instant?,
        serial: UInt64, easy: CurlEasy, disk: DiskCache, policy: DownloadPolicy, askForRoom: @escaping (Transfer, Int) -> Void,
        admit: @escaping (Transfer, Int) -> Bool, makeSpill: @escaping (CacheKey, Int?) -> BodySpill
    ) {
        self.admit = admit
        self.makeSpill = makeSpill
        self.askForRoom = askForRoom
        self.job = job
        self.target = target
        self.redirects = redirects
        // Not for a fallback, nor for a host with headers of its own (``DownloadPolicy/tierRoute(for:)``).
        let route = direct ? nil : policy.tierRoute(for: target)
        let tierURL = route?.requestURL(for: target)
        self.tier = tierURL == nil ? nil : route
        self.requestURL = tierURL ?? target.normalized
        self.serial = serial
        self.easy = easy
        self.reservation = SpaceReservation(budget: disk.budget)
        self.maxBodyBytes = policy.maxBodyBytes
        self.totalTimeout = policy.totalTimeout
        self.addresses = policy.addresses
        self.startedAt = attemptStartedAt ?? .now
        errorBuffer.initialize(to: 0)
    }

    deinit {
        // libcurl keeps the pointer until the handle is cleaned up, which happens after this
        // (the handle is a stored property): take it back first.
        try? easy.set(CURLOPT_ERRORBUFFER, pointer: nil)
        errorBuffer.deallocate()
        if headers != nil { try? easy.set(CURLOPT_HTTPHEADER, pointer: nil) }
    }

    /// Body bytes received so far.
    var bytesReceived: Int { spilledBytes + buffer.count }

    /// libcurl's message for the failure, or "".
    var errorDetail: String { String(cString: errorBuffer) }

    /// Applies imgd's policy to the transfer's fresh easy handle.
    func configure(_ policy: DownloadPolicy) throws(CurlSetupError) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        try easy.set(CURLOPT_URL, requestURL)
        try easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        // The engine follows redirects itself (``TransferEngine/redirectStep(after:result:)``): it
        // resolves and checks each target and fetches it on a handle of its own.
        try easy.set(CURLOPT_FOLLOWLOCATION, false)
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, policy.connectTimeout.milliseconds)
        // What is left of the attempt's time (all of it for its first request); at least 1 ms,
        // since 0 means no limit to libcurl.
        try easy.set(CURLOPT_TIMEOUT_MS, max(1, (totalTimeout - (ContinuousClock.now - startedAt)).milliseconds))
        try easy.set(CURLOPT_LOW_SPEED_LIMIT, policy.lowSpeedLimit)
        try easy.set(CURLOPT_LOW_SPEED_TIME, max(1, Int(policy.lowSpeedTime.components.seconds)))
        // Rejects a declared Content-Length over the cap before any byte is read; bodies
        // without one are counted in `receive`.
        try easy.set(CURLOPT_MAXFILESIZE_LARGE, offset: Int64(job.documentLimit ?? policy.maxBodyBytes))
        // An empty proxy disables the *_proxy environment variables: a proxy is used only when
        // configured. An empty no-proxy list keeps libcurl from reading NO_PROXY/no_proxy, which
        // would otherwise send some hosts around a configured proxy. No cookie engine, no .netrc,
        // and no Accept-Encoding: images are already compressed, and inflating would turn a small
        // gzip bomb into a huge body.
        try easy.set(CURLOPT_PROXY, policy.proxy ?? "")
        try easy.set(CURLOPT_NOPROXY, "")
        try easy.set(CURLOPT_NETRC, Int(CURL_NETRC_IGNORED.rawValue))
        try easy.set(CURLOPT_USERAGENT, policy.userAgent)
        try easy.set(CURLOPT_NOSIGNAL, true)
        // Waiting to multiplex pays only over TLS, where ALPN answers during the handshake. Over
        // plain http a new host's answer comes with its first response: every other transfer to
        // it would wait for that (a slow or stalled first image holds back the whole host).
        try easy.set(CURLOPT_PIPEWAIT, requestURL.hasPrefix("https:"))
        // A private CA's certificates replace the system's store for this transfer; without a
        // file libcurl uses the store it was built with (Debian: /etc/ssl/certs).
        if let caFile = policy.caFile { try easy.set(CURLOPT_CAINFO, caFile) }
        // Every header the request sends, built in one place (``RequestHeaders``): the target
        // host's, and only when they may go to this URL (``HostRules/Rule/headers(for:)``: https
        // to the table's port, http only if the table allows it). A redirect is a request of its
        // own, configured for its target, so a hop to another host, port or to http drops them;
        // libcurl, following by itself, would keep them. Then a revalidation's validators.
        // A downgrade (a hop from https to http) carries none, whatever the hop's table allows
        // over http: the origin that redirected chose clear text, not the configuration.
        // (`lastTarget` is still the hop before this one: it is set once this one is added.)
        let downgraded = redirects > 0 && job.lastTarget?.scheme == "https" && target.scheme == "http"
        let configured = downgraded ? [] : policy.hosts.headers(for: target)
        let request = RequestHeaders(host: configured.map(\.line), validators: job.validators)
        if !request.isEmpty {
            guard let list = CurlHeaderList(request.lines) else { throw CurlSetupError(what: "curl_slist_append", code: -1) }
            headers = list
            try easy.set(CURLOPT_HTTPHEADER, pointer: UnsafeMutableRawPointer(list.list))
        }
        try easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
        try easy.set(CURLOPT_WRITEFUNCTION, write: transferWriteCallback)
        try easy.set(CURLOPT_WRITEDATA, pointer: me)
        try easy.set(CURLOPT_OPENSOCKETFUNCTION, openSocket: transferOpenSocketCallback)
        try easy.set(CURLOPT_OPENSOCKETDATA, pointer: me)
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
            // An error page's bytes use the link too: the cap holds them back like a body's.
            guard admit(self, bytes.count) else { return CurlEasy.pauseWriting }
            discardedBytes += bytes.count
            return discardedBytes > Self.maxDiscardedBytes ? 0 : bytes.count
        }
        if bodyStartedAt == nil { bodyStartedAt = .now }
        if let limit = job.documentLimit { return receiveDocument(bytes, limit: limit) }
        if let failure = spill?.failure {
            abort = .disk(failure)
            return 0
        }
        // `max-size` caps a declared length before anything is held for it (libcurl refuses such
        // a length at the headers already; this keeps the reservation below from trusting it).
        guard bytesReceived + bytes.count <= maxBodyBytes, (declaredLength ?? 0) <= maxBodyBytes else {
            abort = .tooLarge(limit: maxBodyBytes)
            return 0
        }
        // The first bytes are judged before any room is held for them: an error page with a
        // large declared length is refused here, having made the cache evict nothing.
        if isSniffing {
            switch sniff(with: bytes) {
            case .notImage:
                abort = .notImage
                return 0
            case .image:
                isSniffing = false
                passedSniff = true
            case .needMoreBytes:
                if buffer.count + bytes.count >= Self.maxSniffBytes { isSniffing = false }
            }
        }
        // The cap is hard: room is held before a byte is kept. Until the body has passed the
        // sniff only what has arrived is held (exactly while sniffing: a few bytes must not cost
        // a chunk's eviction); then the declared size, but never more than twice what has
        // arrived (and a chunk ahead): the sniff reads magic bytes only, so an origin declaring
        // 60 MB after a PNG signature and then stalling costs a chunk's eviction, not 60 MB,
        // while a real large body grows its room in a few steps (each a budget update while
        // there is free space). An undeclared body grows chunk by chunk (so does a body the sniff
        // could not judge). Space that is not free is asked of the cache, which evicts on its own
        // queue; these bytes wait in libcurl meanwhile.
        let arrived = bytesReceived + bytes.count
        let needed: Int
        if passedSniff, let declared = declaredLength {
            needed = max(arrived, min(declared, max(2 * arrived, arrived + SpaceReservation.chunk)))
        } else {
            needed = arrived
        }
        if case .refused = room {
            abort = .diskFull(needed: needed)
            return 0
        }
        let wanted = reservation.shortfall(holding: needed, exact: isSniffing || needed == declaredLength)
        if wanted > 0 {
            room = .waiting
            askForRoom(self, wanted)
            return CurlEasy.pauseWriting
        }
        // The last gate before the bytes are kept: a pause for the cap after one for room finds
        // the room already held when libcurl offers these bytes again.
        guard admit(self, bytes.count) else { return CurlEasy.pauseWriting }
        if buffer.capacity == 0 {
            // As much as the body needs when its length is declared (most images are far
            // smaller than the buffer), else a start that grows by doubling.
            buffer.reserveCapacity(min(Self.bufferLimit, maxBodyBytes, declaredLength ?? Self.undeclaredStart))
        }
        buffer.append(contentsOf: bytes)
        if buffer.count >= Self.bufferLimit { spillBuffer() }
        return bytes.count
    }

    /// A document's bytes (a sitemap, ``Job/documentLimit``): kept in memory up to `limit`, with
    /// no sniff, no room in the cache and no spill, since it is read, not cached. `max-rate`
    /// holds it back as it does an image.
    private func receiveDocument(_ bytes: UnsafeRawBufferPointer, limit: Int) -> Int {
        guard buffer.count + bytes.count <= limit, (declaredLength ?? 0) <= limit else {
            abort = .tooLarge(limit: limit)
            return 0
        }
        guard admit(self, bytes.count) else { return CurlEasy.pauseWriting }
        buffer.append(contentsOf: bytes)
        return bytes.count
    }

    /// The sniff's verdict on the body's first bytes with `bytes` after those kept so far, before
    /// `bytes` are kept. Sniffing ends within ``maxSniffBytes``, long before the first spill, so
    /// what was kept is all in `buffer`. The first offer is judged where it lies; a later one is
    /// appended for the look and taken off again (the buffer's capacity stays: no allocation).
    private func sniff(with bytes: UnsafeRawBufferPointer) -> ImageSniff {
        guard !buffer.isEmpty else {
            return ImageValidator.sniff(UnsafeRawBufferPointer(rebasing: bytes.prefix(Self.maxSniffBytes)), isComplete: false)
        }
        let kept = buffer.count
        buffer.append(contentsOf: bytes.prefix(Self.maxSniffBytes - min(kept, Self.maxSniffBytes)))
        defer { buffer.removeLast(buffer.count - kept) }
        return buffer.withUnsafeBytes { all in
            ImageValidator.sniff(UnsafeRawBufferPointer(rebasing: all.prefix(Self.maxSniffBytes)), isComplete: false)
        }
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
        // Held back by the cap meanwhile: the bucket resumes it.
        if !throttle.isPaused { easy.resumeReceiving() }
    }

    /// Hands the full buffer to the spill (made with the first one) and starts a new one. The
    /// buffer is moved, not copied: the spill's lane holds the only reference.
    private func spillBuffer() {
        let spill = self.spill ?? makeSpill(job.key, declaredLength)
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

    /// Decides whether to let libcurl connect to `address`: not when `address` is refused. (The
    /// URL's own host, when it is a literal address, was checked before the transfer started:
    /// with a proxy, `address` is the proxy's, never the target's.)
    func mayConnect(to address: UnsafePointer<curl_sockaddr>) -> Bool {
        var raw = [UInt8](repeating: 0, count: 16)
        guard imgd_curl_sockaddr_to_ipv6(address, &raw) == 1 else { return true }
        let peer = raw.withUnsafeBytes { IPRange.Address(bytes: $0) }
        guard let refusal = addresses.refusal(of: peer) else { return true }
        abort = .policyDenied("connecting to \(peer) is refused: \(refusal)")
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

extension Duration {
    /// Whole milliseconds, for libcurl's `_MS` options.
    var milliseconds: Int {
        let parts = components
        return Int(parts.seconds) * 1000 + Int(parts.attoseconds / 1_000_000_000_000_000)
    }
}
