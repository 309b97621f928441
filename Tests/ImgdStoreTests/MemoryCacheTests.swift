import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdStore

@Suite("Memory tier", .offThePool)
struct MemoryCacheTests {
    /// Keys 0..<200, made once: `ImageURL` parsing is not what these tests measure.
    private static let k: [CacheKey] = (0..<200).map { try! ImageURL("http://example.com/\($0).png").cacheKey }
    private var k: [CacheKey] { Self.k }

    private func bytes(_ count: Int, _ fill: UInt8 = 7) -> [UInt8] {
        [UInt8](repeating: fill, count: count)
    }

    @Test("the least recently used entry goes first; reading an entry saves it")
    func lruOrder() throws {
        let cache = MemoryCache(limitEntries: 3)
        for i in 0..<3 { cache.insert(bytes(10), for: k[i]) }
        #expect(cache.value(for: k[0]) != nil)  // 0 is now the most recent; 1 the least
        cache.insert(bytes(10), for: k[3])
        #expect(cache.value(for: k[1]) == nil)
        #expect(cache.keysByRecency().map(\.key) == [k[3], k[0], k[2]])
        cache.insert(bytes(10), for: k[4])
        #expect(cache.keysByRecency().map(\.key) == [k[4], k[3], k[0]])
    }

    @Test("the byte limit evicts least recent entries until the total fits")
    func byteLimit() throws {
        let cache = MemoryCache(limitBytes: 800)
        for i in 0..<10 { cache.insert(bytes(100), for: k[i]) }
        let stats = cache.statistics
        #expect(stats.bytes == 800)
        #expect(stats.entries == 8)
        #expect(cache.value(for: k[1]) == nil)
        #expect(cache.value(for: k[2]) != nil)
        cache.insert(bytes(60), for: k[10])  // 860 bytes: evicts the oldest (3) to 760
        #expect(cache.statistics.bytes == 760)
        #expect(cache.value(for: k[3]) == nil)
    }

    @Test("the entry limit holds however small the entries are")
    func entryLimit() throws {
        let cache = MemoryCache(limitEntries: 5)
        for i in 0..<20 { cache.insert(bytes(1), for: k[i]) }
        #expect(cache.statistics.entries == 5)
        #expect(cache.keysByRecency().map(\.key) == (15..<20).reversed().map { k[$0] })
    }

    @Test("an object larger than 1/8 of the byte limit is refused and counted")
    func eighthRule() throws {
        let cache = MemoryCache(limitBytes: 800)
        cache.insert(bytes(100), for: k[0])
        cache.insert(bytes(101), for: k[1])
        #expect(cache.value(for: k[0])?.count == 100)
        #expect(cache.value(for: k[1]) == nil)
        #expect(cache.statistics.rejected == 1)
        // Replacing a kept image with a too large version drops the old bytes too.
        cache.insert(bytes(200), for: k[0])
        #expect(cache.value(for: k[0]) == nil)
        #expect(cache.statistics.rejected == 2)
        #expect(cache.statistics.bytes == 0)
    }

    @Test("by default: 64 MiB, 10,000 entries, objects up to 8 MiB")
    func defaults() throws {
        let cache = MemoryCache()
        let stats = cache.statistics
        #expect(stats.limitBytes == 64 << 20)
        #expect(stats.limitEntries == 10_000)
        cache.insert(bytes(8 << 20), for: k[0])
        cache.insert(bytes((8 << 20) + 1), for: k[1])
        #expect(cache.statistics.entries == 1)
        #expect(cache.statistics.rejected == 1)
    }

    @Test("an insert replaces the key's bytes and makes it the most recent")
    func replace() throws {
        let cache = MemoryCache(limitEntries: 2)
        cache.insert(bytes(10, 1), for: k[0])
        cache.insert(bytes(10), for: k[1])
        cache.insert(bytes(20, 2), for: k[0])
        #expect(cache.statistics.bytes == 30)
        #expect(cache.statistics.entries == 2)
        cache.insert(bytes(10), for: k[2])  // evicts 1, not the replaced 0
        #expect(cache.value(for: k[0]) == bytes(20, 2))
        #expect(cache.value(for: k[1]) == nil)
    }

    @Test("remove forgets one key and its bytes; removing an absent key is harmless")
    func remove() throws {
        let cache = MemoryCache()
        cache.insert(bytes(10), for: k[0])
        cache.insert(bytes(20), for: k[1])
        cache.remove(k[0])
        cache.remove(k[5])
        #expect(cache.value(for: k[0]) == nil)
        #expect(cache.statistics.bytes == 20)
        #expect(cache.statistics.entries == 1)
        // A removed slot is reused; order stays right.
        cache.insert(bytes(30), for: k[2])
        #expect(cache.keysByRecency().map(\.key) == [k[2], k[1]])
    }

    @Test("a purge empties the cache and refuses inserts until the cool-down has passed")
    func purgeAndCoolDown() throws {
        let clock = TestClock()
        let cache = MemoryCache(coolDown: .seconds(30), now: clock.now)
        for i in 0..<5 { cache.insert(bytes(100), for: k[i]) }
        cache.purge()
        var stats = cache.statistics
        #expect(stats.entries == 0)
        #expect(stats.bytes == 0)
        #expect(stats.purges == 1)
        #expect(stats.isCoolingDown)
        #expect(cache.value(for: k[0]) == nil)

        cache.insert(bytes(10), for: k[0])
        clock.advance(by: .seconds(29))
        cache.insert(bytes(10), for: k[1])
        stats = cache.statistics
        #expect(stats.entries == 0)
        #expect(stats.rejected == 2)
        #expect(stats.isCoolingDown)

        clock.advance(by: .seconds(1))
        #expect(!cache.statistics.isCoolingDown)
        cache.insert(bytes(10), for: k[2])
        #expect(cache.value(for: k[2]) != nil)

        // A second purge starts a new cool-down from its own time.
        cache.purge()
        clock.advance(by: .seconds(10))
        #expect(cache.statistics.isCoolingDown)
        #expect(cache.statistics.purges == 2)
    }

    @Test("shrinking the limits evicts at once, least recent first, and drops objects over the new 1/8")
    func shrink() throws {
        let cache = MemoryCache(limitBytes: 8000, limitEntries: 100)
        for i in 0..<10 { cache.insert(bytes(100), for: k[i]) }
        cache.setLimits(bytes: 8000, entries: 4)
        #expect(cache.keysByRecency().map(\.key) == (6..<10).reversed().map { k[$0] })
        cache.setLimits(bytes: 250 * 8, entries: 4)
        #expect(cache.statistics.bytes == 400)
        cache.insert(bytes(10), for: k[20])
        cache.setLimits(bytes: 99 * 8, entries: 4)  // every 100-byte object is now over 1/8
        #expect(cache.keysByRecency().map(\.key) == [k[20]])
        let stats = cache.statistics
        #expect(stats.limitBytes == 792)
        #expect(stats.limitEntries == 4)
        #expect(stats.bytes == 10)
        // Growing again keeps what is there and accepts more.
        cache.setLimits(bytes: 8000, entries: 100)
        for i in 0..<10 { cache.insert(bytes(100), for: k[i]) }
        #expect(cache.statistics.entries == 11)
    }

    @Test("hits and misses are counted per lookup")
    func counters() throws {
        let cache = MemoryCache()
        cache.insert(bytes(10), for: k[0])
        _ = cache.value(for: k[0])
        _ = cache.value(for: k[0])
        _ = cache.value(for: k[1])
        #expect(cache.statistics == MemoryCache.Statistics(
            hits: 2, misses: 1, bytes: 10, entries: 1, purges: 0, rejected: 0,
            limitBytes: 64 << 20, limitEntries: 10_000, isCoolingDown: false))
    }

    @Test("empty images are kept and cost nothing; a zero entry limit keeps nothing")
    func edges() throws {
        let cache = MemoryCache(limitBytes: 0, limitEntries: 2)
        cache.insert([], for: k[0])
        #expect(cache.value(for: k[0]) == [])
        cache.setLimits(bytes: 800, entries: 0)
        cache.insert(bytes(10), for: k[1])
        #expect(cache.statistics.entries == 0)
    }

    @Test("many tasks at once: the limits hold at every moment and the byte count stays exact")
    func concurrency() async throws {
        let limitBytes = 64 << 10
        let limitEntries = 50
        let cache = MemoryCache(limitBytes: limitBytes, limitEntries: limitEntries)
        let keys = k
        let violations = await withTaskGroup(of: Int.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var violations = 0
                    var random = SystemRandomNumberGenerator()
                    for step in 0..<3000 {
                        let key = keys[Int.random(in: 0..<keys.count, using: &random)]
                        switch step % 7 {
                        case 0, 1, 2:
                            let size = Int.random(in: 0...9000, using: &random)
                            cache.insert([UInt8](repeating: UInt8(worker), count: size), for: key)
                        case 3: cache.remove(key)
                        case 4 where step % 700 == 4: cache.purge()
                        default:
                            if let value = cache.value(for: key), Set(value).count > 1 {
                                violations += 1  // bytes of two inserts mixed
                            }
                        }
                        let stats = cache.statistics
                        if stats.bytes > limitBytes || stats.entries > limitEntries || stats.bytes < 0 {
                            violations += 1
                        }
                    }
                    return violations
                }
            }
            return await group.reduce(0, +)
        }
        #expect(violations == 0)
        let stored = cache.keysByRecency()
        let stats = cache.statistics
        #expect(stats.bytes == stored.reduce(0) { $0 + $1.size })
        #expect(stats.entries == stored.count)
        #expect(Set(stored.map(\.key)).count == stored.count)
        #expect(stored.allSatisfy { $0.size <= limitBytes / 8 })
        #expect(stats.hits + stats.misses > 0)
    }
}

/// A clock the test moves by hand, so the cool-down is tested without waiting.
private final class TestClock: Sendable {
    private let current = Locked(ContinuousClock.now)

    var now: @Sendable () -> ContinuousClock.Instant {
        { [self] in current.withLock { $0 } }
    }

    func advance(by duration: Duration) {
        current.withLock { $0 += duration }
    }
}
