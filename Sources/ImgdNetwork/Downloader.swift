import ImgdCore
import ImgdStore
import Synchronization

/// Downloads images into the cache: the public face of imgd's transfer engine.
///
/// - Disk first: a URL whose file is already cached is answered without touching the network.
///   When the entry is due for revalidation (``RefreshPolicy``), it is still answered at once,
///   and a conditional request for it is queued at prefetch priority (stale-while-revalidate).
/// - Coalescing: concurrent requests for one URL share one transfer; each gets the result. The
///   in-flight entry goes away on success and on failure, so a failed URL can be fetched again
///   (once its failure is no longer remembered, or after ``forgetFailures(of:)``).
/// - Caps: at most `policy.maxParallel` transfers in all and `policy.maxPerHost` per host.
/// - Order: ``FetchPriority/onDemand`` before ``FetchPriority/prefetch``; submitters take turns.
/// - Cancellation: cancelling the calling task withdraws its request; a transfer nobody waits
///   for any more is stopped.
///
/// Call ``shutdown()`` when done: it cancels what is left and stops the engine's thread.
public final class Downloader: Sendable {
    /// The disk tier downloads go to.
    public let cache: DiskCache
    /// The limits it started with (it may have changed since, by ``update(policy:)``).
    public let policy: DownloadPolicy
    private let engine: TransferEngine
    private let submitterSerial = Atomic<UInt64>(0)
    private let held = HeldRequests()
    /// How URLs become keys; a reload may change it (``update(keyPolicy:)``).
    private let keys: Locked<CacheKeyPolicy>
    /// When cached entries are due for revalidation; a reload may change it.
    private let refresh: Locked<RefreshPolicy>
    /// Told what became of each revalidation started because an entry was due (and of none
    /// other): the daemon's events and memory tier.
    private let revalidationObserver = Locked<FetchToken.Handler?>(nil)
    /// The submitter revalidations take turns as, with the lists (one never made by
    /// ``makeSubmitter()``, which counts up from 1).
    private let revalidationSubmitter = SubmitterID(rawValue: UInt64.max)
    /// The revalidations of due entries not answered yet, bounded by ``DownloadPolicy/maxPendingRevalidations``.
    private let pendingRevalidations = HeldRequests()
    private let maxPendingRevalidations: Atomic<Int>

    /// Starts a downloader writing into `cache` under `policy`, keying URLs by `keyPolicy`.
    /// `onTierFallback` is told of each request that went to its origin directly because the
    /// tier failed (the tier's URL and the cause, the same words for every URL: `502 upstream`,
    /// `no answer (connect)`), on the engine's thread: keep it short.
    public init(
        cache: DiskCache, policy: DownloadPolicy = DownloadPolicy(), keyPolicy: CacheKeyPolicy = .wholeURL,
        refresh: RefreshPolicy = RefreshPolicy(),
        onTierFallback: (@Sendable (_ tier: String, _ cause: String) -> Void)? = nil
    ) throws(CurlSetupError) {
        precondition(policy.maxParallel >= 1 && policy.maxPerHost >= 1, "transfer caps must be at least 1")
        self.cache = cache
        self.policy = policy
        keys = Locked(keyPolicy)
        self.refresh = Locked(refresh)
        maxPendingRevalidations = Atomic(policy.maxPendingRevalidations)
        engine = try TransferEngine(policy: policy, cache: cache, onTierFallback: onTierFallback)
        engine.start()
    }

    /// A new submitter identity, for a list whose URLs should take turns with other lists'.
    public func makeSubmitter() -> SubmitterID {
        SubmitterID(rawValue: submitterSerial.add(1, ordering: .relaxed).newValue)
    }

    /// The key policy in use.
    public var keyPolicy: CacheKeyPolicy { keys.withLock { $0 } }

    /// Takes a new key policy (a reload): requests made from now on are keyed by it. Entries
    /// stored under the old keys stay until evicted.
    public func update(keyPolicy: CacheKeyPolicy) {
        keys.withLock { $0 = keyPolicy }
    }

    /// The freshness settings in use.
    public var refreshPolicy: RefreshPolicy { refresh.withLock { $0 } }

    /// Takes new freshness settings (a reload): uses from now on are judged by them.
    public func update(refresh policy: RefreshPolicy) {
        refresh.withLock { $0 = policy }
    }

    /// Sets who hears what became of the revalidations started because an entry was due (on the
    /// engine's thread: keep it short).
    public func observeRevalidations(_ observer: @escaping @Sendable (ImageURL, Result<CachedImage, DownloadError>) -> Void) {
        revalidationObserver.withLock { $0 = observer }
    }

    /// Queues a revalidation of `entry` (found under `request`'s key) when it is due under
    /// `request`'s rule or the downloader's: a conditional request at prefetch priority, whose
    /// outcome goes to the observer. Returns whether one was queued: not when the entry is not
    /// due, nor when ``DownloadPolicy/maxPendingRevalidations`` are pending already (the entry
    /// stays due, for a later use). Cheap: no I/O.
    ///
    /// Each outcome is heard once: a use of the still-due entry while its revalidation (or a
    /// fetch of its key) is under way asks nothing and adds no outcome. A revalidation that
    /// failed is remembered like any failure of its URL (``DownloadPolicy/failureMemory``):
    /// meanwhile uses ask nothing and the observer hears nothing more; after it, the next use
    /// asks again.
    @discardableResult
    public func revalidateIfDue(_ request: ImageRequest, entry: IndexEntry) -> Bool {
        let policy = refresh.withLock { $0 }
        guard policy.isDue(entry.freshness, override: request.refresh, now: WallClock.nowMilliseconds()) else { return false }
        // An expired signed URL would only be refused: the entry stays due, for a fresh URL's use.
        if Self.expiry(of: request.url) != nil { return false }
        let cap = HeldRequestLimit(requests: maxPendingRevalidations.load(ordering: .relaxed), bytes: .max)
        guard pendingRevalidations.take(1, bytes: HeldRequests.bytes(of: request.url), limit: cap) else { return false }
        let observer = revalidationObserver.withLock { $0 }
        let token = FetchToken(
            request: request, priority: .prefetch, submitter: revalidationSubmitter, held: pendingRevalidations,
            handler: { url, result in observer?(url, result) },
            validators: validators(of: entry, for: request), isDueRevalidation: true)
        if !engine.send(.fetch(token)) { token.answer(.failure(.cancelled)) }
        return true
    }

    /// What ``revalidate(_:priority:limit:caller:handler:)`` took on: how many revalidations it
    /// asked for, and the requests whose entry is not cached (nothing is done for them).
    public struct Revalidation: Sendable {
        /// Revalidations asked for, one per key: each gets one outcome.
        public let asked: Int
        /// The requests whose entry is not cached, one per key.
        public let missing: [ImageRequest]
    }

    /// Revalidates every one of `requests` whose entry is cached, due or not (`imgctl refresh`):
    /// a conditional request each, at `priority`; each outcome goes to `handler` (a `304` is a
    /// success from `.disk`, a new body one from `.network`). Requests naming one key are one
    /// revalidation (the first of them). The revalidations are held requests like any: with
    /// `limit`, when they would take ``heldRequests`` or ``heldRequestBytes`` (or, for `caller`,
    /// its share) past it, nothing is asked and the result is nil.
    public func revalidate(
        _ requests: [ImageRequest], priority: FetchPriority = .prefetch, limit: HeldRequestLimit? = nil, caller: UInt32? = nil,
        handler: @escaping @Sendable (ImageURL, Result<CachedImage, DownloadError>) -> Void
    ) -> Revalidation? {
        var seen = Set<CacheKey>()
        let unique = requests.filter { seen.insert($0.key).inserted }
        let cached = cache.lookup(unique.map(\.key))
        var missing: [ImageRequest] = []
        var found: [(ImageRequest, IndexEntry)] = []
        for request in unique {
            if let entry = cached[request.key] { found.append((request, entry.entry)) } else { missing.append(request) }
        }
        let bytes = found.reduce(0) { $0 + HeldRequests.bytes(of: $1.0.url) }
        let counted = limit != nil && caller != nil
        guard held.take(found.count, bytes: bytes, limit: limit, caller: counted ? caller : nil) else { return nil }
        let tokens = found.map { request, entry in
            FetchToken(
                request: request, priority: priority, submitter: revalidationSubmitter, held: held, handler: handler,
                validators: validators(of: entry, for: request), caller: caller, countedForCaller: counted)
        }
        // A forced revalidation asks the origin even when its last failure is remembered.
        forgetFailures(of: tokens.map(\.key))
        if !tokens.isEmpty, !engine.send(.fetchAll(tokens)) {
            for token in tokens { token.answer(.failure(.cancelled)) }
        }
        return Revalidation(asked: tokens.count, missing: missing)
    }

    /// `url`'s cache key under the key policy.
    public func cacheKey(for url: ImageURL) -> CacheKey {
        keys.withLock { $0 }.key(for: url)
    }

    /// The request for `url` under its key under the key policy; `sha256` is the digest its
    /// body must have.
    public func request(for url: ImageURL, sha256: SHA256Digest? = nil) -> ImageRequest {
        ImageRequest(url: url, key: cacheKey(for: url), expectedSHA256: sha256)
    }

    /// The request for `url` on behalf of the uid `owner`: under the key `chosenKey` names in
    /// `owner`'s own namespace (``CacheKey/init(chosen:owner:)``) when given, else under its
    /// key under the key policy; `sha256` is the digest its body must have.
    public func request(for url: ImageURL, chosenKey: String?, owner: UInt32, sha256: SHA256Digest? = nil) -> ImageRequest {
        ImageRequest(url: url, key: chosenKey.map { CacheKey(chosen: $0, owner: owner) } ?? cacheKey(for: url), expectedSHA256: sha256)
    }

    /// The validators a revalidation of `entry` for `request` may send: only those that the
    /// same URL's own response gave. The entry's URL must be the request's, or, for a key made
    /// from the URL, a URL with the same key under the key policy (a signed URL's other
    /// signature). Otherwise (an entry of a chosen key fetched from another URL, a row written
    /// by an older imgd under a key it shares with a URL) the origin gets an unconditional
    /// request: another URL's validators could make it answer `304` for bytes it never sent.
    func validators(of entry: IndexEntry, for request: ImageRequest) -> Validators? {
        let same = entry.url == request.url.normalized
            || ((try? ImageURL(entry.url)).map { keys.withLock { $0 }.key(for: $0) == request.key } ?? false)
        return same ? Validators(etag: entry.etag, lastModified: entry.lastModified) : nil
    }

    /// The image at `url` (keyed by the key policy), from disk if cached, else downloaded,
    /// validated and cached.
    public func fetch(
        _ url: ImageURL, priority: FetchPriority = .onDemand, submitter: SubmitterID = .interactive
    ) async throws(DownloadError) -> CachedImage {
        try await fetch(request(for: url), priority: priority, submitter: submitter)
    }

    /// The image `request` asks for, from disk if cached (with the digest it names, if any),
    /// else downloaded, validated and cached; the result carries the index row recorded
    /// (``CachedImage/entry``). `caller` is the uid it is fetched for (``cancel(url:caller:)``
    /// by that uid stops it). `checkingDisk: false` is for a caller that has just looked the key
    /// up itself and found nothing: the index is not asked again.
    public func fetch(
        _ request: ImageRequest, priority: FetchPriority = .onDemand, submitter: SubmitterID = .interactive, caller: UInt32? = nil,
        checkingDisk: Bool = true
    ) async throws(DownloadError) -> CachedImage {
        if checkingDisk, let image = cachedImage(for: request) { return image }
        if let expiry = Self.expiry(of: request.url) { throw .urlExpired(expiry) }
        _ = held.take(1, bytes: HeldRequests.bytes(of: request.url), limit: nil)
        let token = FetchToken(request: request, priority: priority, submitter: submitter, held: held, caller: caller)
        let outcome = await withTaskCancellationHandler {
            if token.beginWaiting(), !engine.send(.fetch(token)) { token.answer(.failure(.cancelled)) }
            return await token.outcome
        } onCancel: {
            if token.cancel() { engine.send(.cancelWait(token)) }
        }
        return try outcome.get()
    }

    /// The key a document fetch of `url` runs under: one no image's URL can have (a key is a
    /// URL's hash, and this text is not a URL), so it is never coalesced with the image of the
    /// same URL, nor found in the cache.
    public static func documentKey(for url: ImageURL) -> CacheKey {
        CacheKey(normalizedURL: "document " + url.normalized)
    }

    /// Fetches `url` as a document (a sitemap the spool reads), not an image: through the same
    /// engine as images (the address policy, the host caps, `rate`, headers, the tier, retries
    /// and timeouts), at `priority` in `submitter`'s turn, but its body is not checked as an
    /// image, not cached, and kept in memory up to `limit` bytes (`too_large` past it). The
    /// outcome goes to `handler` on the engine's thread (keep it short): the body, or why not.
    /// The returned token cancels it (``DocumentFetch/cancel()``).
    public func fetchDocument(
        _ url: ImageURL, limit: Int, priority: FetchPriority = .prefetch, submitter: SubmitterID, caller: UInt32? = nil,
        handler: @escaping @Sendable (Result<[UInt8], DownloadError>) -> Void
    ) -> DocumentFetch {
        _ = held.take(1, bytes: HeldRequests.bytes(of: url), limit: nil)
        let token = FetchToken(
            request: ImageRequest(url: url, key: Self.documentKey(for: url)), priority: priority, submitter: submitter, held: held,
            handler: { _, outcome in handler(outcome.map { $0.document ?? [] }) }, caller: caller, documentLimit: limit)
        if !engine.send(.fetch(token)) { token.answer(.failure(.cancelled)) }
        return DocumentFetch(cancel: { [engine] in if token.cancel() { engine.send(.cancelWait(token)) } })
    }

    /// A document fetch under way (``fetchDocument(_:limit:priority:submitter:caller:handler:)``).
    public struct DocumentFetch: Sendable {
        fileprivate let cancelling: @Sendable () -> Void
        fileprivate init(cancel: @escaping @Sendable () -> Void) { cancelling = cancel }
        /// Withdraws it: its handler gets ``DownloadError/cancelled`` (unless answered already).
        public func cancel() { cancelling() }
    }

    /// Requests every URL of `urls` at once, without a task per URL: each result (from disk, the
    /// network or the failure memory) is passed to `handler`, in completion order.
    ///
    /// `handler` runs on the downloader's own thread (or the caller's, for URLs already on
    /// disk): keep it short — count, log, signal — and never block in it. A URL appearing twice
    /// is answered twice. Withdraw the lot with ``cancel(submitter:)``.
    ///
    /// With `limit`, the request is all or nothing: when the URLs not on disk would take
    /// ``heldRequests`` or ``heldRequestBytes`` past `limit`, nothing is requested, `handler` is never called, and the
    /// result is false. Without it (the spool's windows, bounded by their own size) it is
    /// always taken, and counted all the same.
    @discardableResult
    public func prefetch(
        _ urls: [ImageURL], submitter: SubmitterID, priority: FetchPriority = .prefetch, limit: HeldRequestLimit? = nil,
        handler: @escaping @Sendable (ImageURL, Result<CachedImage, DownloadError>) -> Void
    ) -> Bool {
        let policy = keys.withLock { $0 }
        return prefetch(
            urls.map { ImageRequest(url: $0, key: policy.key(for: $0)) }, submitter: submitter, priority: priority, limit: limit,
            handler: handler)
    }

    /// ``prefetch(_:submitter:priority:limit:handler:)`` for requests that carry their own key,
    /// digest and perhaps priority: an entry on disk under the key answers only when it has the
    /// digest named. `caller` is the uid they are asked for: ``cancel(url:caller:)`` by that
    /// uid stops them, and with `limit` they count in its share (``HeldRequestLimit/callerRequests``).
    @discardableResult
    public func prefetch(
        _ requests: [ImageRequest], submitter: SubmitterID, priority: FetchPriority = .prefetch, limit: HeldRequestLimit? = nil,
        caller: UInt32? = nil, handler: @escaping @Sendable (ImageURL, Result<CachedImage, DownloadError>) -> Void
    ) -> Bool {
        let cached = cache.lookup(requests.map(\.key))
        var found: [(ImageRequest, CachedEntry)] = []
        var missing: [ImageRequest] = []
        for request in requests {
            if let entry = cached[request.key], request.expectedSHA256 == nil || request.expectedSHA256 == entry.entry.sha256 {
                found.append((request, entry))
            } else {
                missing.append(request)
            }
        }
        // A signed URL already past its expiry is answered `url_expired` without a request.
        var expired: [(ImageRequest, URLExpiry)] = []
        missing.removeAll { request in
            guard let expiry = Self.expiry(of: request.url) else { return false }
            expired.append((request, expiry))
            return true
        }
        // Decided before any handler runs, so a refused request has no effect at all.
        let missingBytes = missing.reduce(0) { $0 + HeldRequests.bytes(of: $1.url) }
        let counted = limit != nil && caller != nil
        guard held.take(missing.count, bytes: missingBytes, limit: limit, caller: counted ? caller : nil) else { return false }
        let now = WallClock.nowMilliseconds()
        for (request, entry) in found {
            cache.index.recordAccess(request.key, at: now)
            revalidateIfDue(request, entry: entry.entry)
            handler(
                request.url,
                .success(CachedImage(
                    url: request.url, key: request.key, path: entry.path, bytes: entry.entry.bytes, source: .disk, download: nil,
                    entry: entry.entry)))
        }
        for (request, expiry) in expired { handler(request.url, .failure(.urlExpired(expiry))) }
        guard !missing.isEmpty else { return true }
        let tokens = missing.map {
            FetchToken(
                request: $0, priority: $0.priority ?? priority, submitter: submitter, held: held, handler: handler, caller: caller,
                countedForCaller: counted)
        }
        if !engine.send(.fetchAll(tokens)) {
            for token in tokens { token.answer(.failure(.cancelled)) }
        }
        return true
    }

    /// The expiry `url`'s query states (``URLExpiry``) when it has passed now; nil when it has
    /// not, or the URL states none. Asked only of URLs not found on disk (a cached image is
    /// served whatever its URL's signature says).
    static func expiry(of url: ImageURL) -> URLExpiry? {
        guard let expiry = URLExpiry(url), expiry.isExpired(at: URLExpiry.now()) else { return nil }
        return expiry
    }

    /// `url_expired` for `request` when its URL is past its expiry and its entry is not cached
    /// (with the digest it names): what ``prefetch(_:submitter:priority:limit:caller:handler:)``
    /// would answer it, for a caller that replies before the answer comes (`add`).
    public func expiredAndMissing(_ request: ImageRequest) -> DownloadError? {
        guard let expiry = Self.expiry(of: request.url) else { return nil }
        if let found = cache.lookup(request.key), request.expectedSHA256 == nil || request.expectedSHA256 == found.entry.sha256 {
            return nil
        }
        return .urlExpired(expiry)
    }

    /// Requests handed to the engine and not answered yet (queued, running, publishing, waiting
    /// for a retry), from ``fetch(_:priority:submitter:)`` and ``prefetch(_:submitter:priority:limit:handler:)``
    /// alike, one per URL per request. Exact at the time it is read, and cheap to read.
    public var heldRequests: Int { held.value }

    /// The bytes of the URLs of ``heldRequests`` (each request counts its URL's, once per request).
    public var heldRequestBytes: Int { held.bytes }

    /// The held requests counted in `caller`'s share now, and the bytes of their URLs.
    public func heldRequests(by caller: UInt32) -> (requests: Int, bytes: Int) { held.held(by: caller) }

    /// The image `request` asks for if the disk tier has it (checked: see
    /// ``DiskCache/lookup(_:)``), with the digest it names.
    private func cachedImage(for request: ImageRequest) -> CachedImage? {
        guard let found = cache.lookup(request.key),
            request.expectedSHA256 == nil || request.expectedSHA256 == found.entry.sha256
        else { return nil }
        cache.index.recordAccess(request.key, at: WallClock.nowMilliseconds())
        revalidateIfDue(request, entry: found.entry)
        return CachedImage(
            url: request.url, key: request.key, path: found.path, bytes: found.entry.bytes, source: .disk, download: nil, entry: found.entry)
    }

    /// Cancels the requests for `url`: every one when `caller` is nil, else only those asked
    /// for `caller` (the others, and the download they share, go on). Each request cancelled is
    /// answered ``DownloadError/cancelled``.
    public func cancel(url: ImageURL, caller: UInt32? = nil) {
        engine.send(.cancelURL(cacheKey(for: url), caller: caller, reply: nil))
    }

    /// Cancels requests for `url`, as ``cancel(url:caller:)`` does, and tells whether there was
    /// one to cancel (its download queued, running, being checked or waiting for a retry).
    public func cancelDownload(of url: ImageURL, caller: UInt32? = nil) async -> Bool {
        await withCheckedContinuation { continuation in
            if !engine.send(.cancelURL(cacheKey(for: url), caller: caller, reply: { continuation.resume(returning: $0) })) {
                continuation.resume(returning: false)
            }
        }
    }

    /// Cancels every request made with `submitter` (a list being withdrawn). Transfers other
    /// submitters still wait for go on.
    public func cancel(submitter: SubmitterID) {
        engine.send(.cancelSubmitter(submitter))
    }

    /// Forgets the remembered failure of `url` (of every URL when nil), so the next request tries again.
    public func forgetFailures(of url: ImageURL? = nil) {
        engine.send(.forgetFailures(url.map { [cacheKey(for: $0)] }))
    }

    /// Forgets the remembered failures of the URLs whose keys are `keys` (one command for all).
    public func forgetFailures(of keys: [CacheKey]) {
        guard !keys.isEmpty else { return }
        engine.send(.forgetFailures(keys))
    }

    /// Changes the policy while running (a reload): transfers already running finish under the
    /// old one; new ones start only while under the new caps, and follow its other limits.
    public func update(policy: DownloadPolicy) {
        precondition(policy.maxParallel >= 1 && policy.maxPerHost >= 1, "transfer caps must be at least 1")
        maxPendingRevalidations.store(policy.maxPendingRevalidations, ordering: .relaxed)
        engine.send(.updatePolicy(policy))
    }

    /// Holds `submitter`'s queued prefetches (a list outside its calendar window), or lets them
    /// start again. Its running transfers finish; a job an on-demand `get` joined is not held.
    public func hold(_ submitter: SubmitterID, _ isHeld: Bool) {
        engine.send(.holdSubmitter(submitter, isHeld))
    }

    /// Gives `submitter` `weight` turns for every one of the other prefetch submitters, and that
    /// many times their share of the slots when the slots are shared out (a list at risk of
    /// missing its deadline); 1 is the equal share every submitter starts with.
    public func weigh(_ submitter: SubmitterID, _ weight: Int) {
        precondition(weight >= 1, "a submitter's weight is at least 1")
        engine.send(.weighSubmitter(submitter, weight))
    }

    /// Caps the prefetch transfers running at once (the courtesy loop); nil: only `max-parallel`.
    /// On-demand transfers are neither counted nor held by it.
    public func limitPrefetch(_ limit: Int?) {
        precondition(limit.map { $0 >= 1 } ?? true, "the prefetch cap must be at least 1")
        engine.send(.limitPrefetch(limit))
    }

    /// Returns once the engine's loop has taken a command sent now, and did nothing for it: a
    /// round trip through the loop, for the watchdog (a loop stuck in a turn never answers).
    /// A stopped engine answers at once. Costs nothing on the loop, unlike
    /// ``rememberedFailures()``, which copies up to ``DownloadPolicy/maxRememberedFailures``.
    public func ping() async {
        await withCheckedContinuation { continuation in
            if !engine.send(.ping { continuation.resume() }) { continuation.resume() }
        }
    }

    /// Returns once every body handed to the publisher before the call has its row committed (or
    /// has failed): for a reader that found a key being published (``DiskCache/openVerified(_:)``
    /// answered `.publishing`) and must see the row that goes with the file.
    public func settlePublishing() async {
        await engine.publisher.settle()
    }

    /// The failures remembered now (each URL is answered with its error without a new attempt
    /// until the memory expires or ``forgetFailures(of:)``).
    public func rememberedFailures() async -> [(url: String, error: DownloadError)] {
        await withCheckedContinuation { continuation in
            if !engine.send(.listFailures { continuation.resume(returning: $0) }) { continuation.resume(returning: []) }
        }
    }

    /// One page of the remembered failures, in URL order: those after `after` (from the first
    /// when nil), at most `limit` (see ``RememberedFailurePage``).
    public func rememberedFailures(after: String?, limit: Int) async -> RememberedFailurePage {
        await withCheckedContinuation { continuation in
            let sent = engine.send(.listFailurePage(after: after, limit: limit) { continuation.resume(returning: $0) })
            if !sent { continuation.resume(returning: RememberedFailurePage(of: [], after: nil, limit: limit)) }
        }
    }

    /// What the engine knows of `key` (a job under way, a remembered failure, its last
    /// outcomes) and of `url`'s host (slots, queue, hold), and how the policy in force treats
    /// `url` (address, tier): one command to the engine, answered on its thread with a copy of a
    /// few fields (it never walks the queue). A stopped engine answers at once, saying so.
    public func explain(_ key: CacheKey, url: ImageURL) async -> EngineExplanation {
        await withCheckedContinuation { continuation in
            let sent = engine.send(.explain(key, url: url) { continuation.resume(returning: $0) })
            if !sent { continuation.resume(returning: .engineStopped(url)) }
        }
    }

    /// Counters and gauges, as of the engine's last turn (at most a second old).
    public var statistics: DownloaderStatistics { engine.snapshot }

    /// How long transfers took, by outcome (lock-free; read at any time).
    public var transferDurations: TransferDurations { engine.transferDurations }

    /// Cancels everything still queued or running and waits for the engine to release libcurl.
    public func shutdown() async {
        engine.send(.stop)
        await engine.waitUntilStopped()
    }

    /// Cancels everything still queued or running and waits for the engine to release libcurl,
    /// at most `limit`; true when it did. Past the limit (or when the calling task is
    /// cancelled) the engine goes on stopping on its own thread.
    public func shutdown(within limit: Duration) async -> Bool {
        engine.send(.stop)
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await self.engine.waitUntilStopped()
                return !Task.isCancelled
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}
