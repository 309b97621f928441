import DequeModule
import ImgdCore

/// The failures the engine remembers against URLs: for ``DownloadPolicy/failureMemory`` after
/// a URL failed, a request for it is answered with the same error at once instead of a new
/// attempt (a broken link in a thousand lists is fetched once, not a thousand times).
///
/// Bounded by count and by bytes as well as by time: whoever can `add` URLs could otherwise make
/// the daemon remember millions of distinct failing URLs for ten minutes (a refused connection
/// fails in microseconds), and 100,000 URLs of 8 KiB are ~800 MB. Past ``capacity`` failures or
/// ``byteCapacity`` bytes (URL and message) the oldest are forgotten first — forgetting only
/// costs a new attempt. Entries are kept in the order they were remembered (the time they expire, as the
/// memory's length only changes on a reload), so expiry and the cap both take from the front,
/// never scanning the rest.
///
/// Owned by the engine's loop thread, like everything else of the engine.
struct FailureMemory {
    struct Entry {
        let url: String
        let error: DownloadError
        let until: ContinuousClock.Instant
        /// Which remembering this is, so a stale place in `order` (the URL failed again since,
        /// or was forgotten) is told from the live one.
        let serial: UInt64
        /// What it counts against ``FailureMemory/byteCapacity``: its URL's and message's bytes.
        let bytes: Int
    }

    /// Failures kept at most.
    var capacity: Int
    /// Bytes of URLs and messages kept at most: 32 MiB by default, ~4,000 failures of the
    /// longest URLs (8 KiB) or the full ``capacity`` of ordinary ones.
    var byteCapacity: Int
    static let defaultByteCapacity = 32 << 20
    /// Bytes of the URLs and messages kept now.
    private(set) var bytes = 0
    private var entries: [CacheKey: Entry] = [:]
    /// Keys in the order they were remembered; a key remembered again appears again, and only
    /// its newest place (the one with the entry's serial) counts.
    private var order: Deque<(key: CacheKey, serial: UInt64)> = []
    private var nextSerial: UInt64 = 0

    init(capacity: Int, byteCapacity: Int = FailureMemory.defaultByteCapacity) {
        precondition(capacity >= 1 && byteCapacity >= 1, "the failure memory needs room for one failure")
        self.capacity = capacity
        self.byteCapacity = byteCapacity
    }

    /// Failures remembered now (some may have expired since the last ``expire(now:)``).
    var count: Int { entries.count }

    /// Remembers that `url` (`key`) failed with `error` until `until`, forgetting the oldest
    /// failures when over ``capacity``.
    mutating func remember(_ key: CacheKey, url: String, error: DownloadError, until: ContinuousClock.Instant) {
        nextSerial += 1
        let size = url.utf8.count + error.description.utf8.count
        bytes += size - (entries[key]?.bytes ?? 0)
        entries[key] = Entry(url: url, error: error, until: until, serial: nextSerial, bytes: size)
        order.append((key, nextSerial))
        // The newest stays even when it alone is over the byte cap: one failure is small next
        // to the cap (a URL is at most 8 KiB).
        while entries.count > capacity || (bytes > byteCapacity && entries.count > 1), let oldest = order.popFirst() {
            dropIfCurrent(oldest)
        }
        compactIfStale()
    }

    /// The failure remembered for `key` and not expired at `now`; an expired one is forgotten.
    mutating func failure(for key: CacheKey, now: ContinuousClock.Instant) -> Entry? {
        guard let entry = entries[key] else { return nil }
        guard entry.until > now else {
            remove(key)
            return nil
        }
        return entry
    }

    /// The failure remembered for `key` and not expired at `now`, leaving the memory as it is.
    func peek(_ key: CacheKey, now: ContinuousClock.Instant) -> Entry? {
        entries[key].flatMap { $0.until > now ? $0 : nil }
    }

    mutating func forget(_ key: CacheKey) {
        remove(key)
        compactIfStale()
    }

    mutating func forgetAll() {
        entries.removeAll()
        order.removeAll()
        bytes = 0
    }

    /// Forgets what has expired at `now`: from the front, stopping at the first that has not.
    mutating func expire(now: ContinuousClock.Instant) {
        while let first = order.first {
            guard let entry = entries[first.key], entry.serial == first.serial else {
                order.removeFirst()  // stale place
                continue
            }
            guard entry.until <= now else { break }
            remove(first.key)
            order.removeFirst()
        }
    }

    /// The failures not expired at `now`, in no particular order.
    func live(now: ContinuousClock.Instant) -> some Sequence<(url: String, error: DownloadError)> {
        entries.values.lazy.filter { $0.until > now }.map { (url: $0.url, error: $0.error) }
    }

    private mutating func dropIfCurrent(_ place: (key: CacheKey, serial: UInt64)) {
        if entries[place.key]?.serial == place.serial { remove(place.key) }
    }

    private mutating func remove(_ key: CacheKey) {
        guard let entry = entries.removeValue(forKey: key) else { return }
        bytes -= entry.bytes
    }

    /// Keeps `order` within a small multiple of the live entries: a URL that fails again and
    /// again, or failures forgotten one by one, leave stale places behind.
    private mutating func compactIfStale() {
        guard order.count > 2 * entries.count + 1024 else { return }
        order = Deque(order.filter { entries[$0.key]?.serial == $0.serial })
    }
}
