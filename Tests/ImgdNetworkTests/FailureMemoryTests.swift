import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

@Suite("Failure memory", .offThePool)
struct FailureMemoryTests {
    private static func key(_ n: Int) throws -> (CacheKey, String) {
        let url = try ImageURL("http://origin.test/\(n).png")
        return (url.cacheKey, url.normalized)
    }

    @Test("past its capacity the oldest failures are forgotten first; the newest stay")
    func capacity() throws {
        var memory = FailureMemory(capacity: 1000)
        let now = ContinuousClock.now
        for n in 0..<5000 {
            let (key, url) = try Self.key(n)
            memory.remember(key, url: url, error: .connect("refused"), until: now + .seconds(600))
        }
        #expect(memory.count == 1000)
        #expect(memory.failure(for: try Self.key(0).0, now: now) == nil)
        #expect(memory.failure(for: try Self.key(3999).0, now: now) == nil)
        #expect(memory.failure(for: try Self.key(4000).0, now: now)?.url == "http://origin.test/4000.png")
        #expect(memory.failure(for: try Self.key(4999).0, now: now) != nil)
        #expect(Array(memory.live(now: now)).count == 1000)
    }

    @Test("a URL that fails again is one failure, renewed: it is not dropped for its first remembering")
    func rememberedAgain() throws {
        var memory = FailureMemory(capacity: 3)
        let now = ContinuousClock.now
        let (first, firstURL) = try Self.key(1)
        memory.remember(first, url: firstURL, error: .timeout("slow"), until: now + .seconds(10))
        for n in 2...3 {
            let (key, url) = try Self.key(n)
            memory.remember(key, url: url, error: .connect("refused"), until: now + .seconds(10))
        }
        // 1 fails again (newest now): the next new failure pushes out 2, the oldest, not 1.
        memory.remember(first, url: firstURL, error: .http(status: 503, retryAfter: nil), until: now + .seconds(20))
        let (fourth, fourthURL) = try Self.key(4)
        memory.remember(fourth, url: fourthURL, error: .connect("refused"), until: now + .seconds(20))
        #expect(memory.count == 3)
        #expect(memory.failure(for: first, now: now)?.error == .http(status: 503, retryAfter: nil))
        #expect(memory.failure(for: try Self.key(2).0, now: now) == nil)
        #expect(memory.failure(for: try Self.key(3).0, now: now) != nil)
        // Remembering one URL over and over keeps one entry and a bounded order behind it.
        for _ in 0..<10_000 { memory.remember(first, url: firstURL, error: .http(status: 503, retryAfter: nil), until: now + .seconds(20)) }
        #expect(memory.count == 3)
        #expect(memory.failure(for: fourth, now: now) != nil)
    }

    @Test("expiry forgets from the front and stops at the first live failure; a forgotten URL is asked again")
    func expiry() throws {
        var memory = FailureMemory(capacity: 100)
        let now = ContinuousClock.now
        for n in 0..<10 {
            let (key, url) = try Self.key(n)
            memory.remember(key, url: url, error: .connect("refused"), until: now + .seconds(n + 1))
        }
        memory.expire(now: now + .milliseconds(5500))
        #expect(memory.count == 5)
        #expect(memory.failure(for: try Self.key(4).0, now: now) == nil)
        #expect(memory.failure(for: try Self.key(5).0, now: now) != nil)
        // Asked after it expired but before a sweep: not answered from memory.
        #expect(memory.failure(for: try Self.key(9).0, now: now + .seconds(11)) == nil)
        memory.forget(try Self.key(5).0)
        #expect(memory.failure(for: try Self.key(5).0, now: now) == nil)
        memory.forgetAll()
        #expect(memory.count == 0)
    }
}

@Suite("Failure memory: bounded by bytes", .offThePool)
struct FailureMemoryBytesTests {
    @Test("failures of 8 KiB URLs past the byte cap: the oldest are forgotten, the bytes kept stay within the cap, the newest stay; forgetting gives the bytes back")
    func byteCapacity() throws {
        let cap = 1 << 20
        var memory = FailureMemory(capacity: 100_000, byteCapacity: cap)
        let now = ContinuousClock.now
        let padding = String(repeating: "a", count: 8000)
        var keys: [CacheKey] = []
        for n in 0..<500 {
            let url = try ImageURL("http://127.0.0.1:1/?\(n)-\(padding)")
            keys.append(url.cacheKey)
            memory.remember(url.cacheKey, url: url.normalized, error: .connect("refused"), until: now + .seconds(600))
            #expect(memory.bytes <= cap)
        }
        // ~8 KiB each: about 128 fit in 1 MiB, not 500.
        #expect(memory.count < 140 && memory.count > 100, "\(memory.count) kept")
        #expect(memory.failure(for: keys[0], now: now) == nil)
        #expect(memory.failure(for: keys[499], now: now) != nil)
        for key in keys { memory.forget(key) }
        #expect(memory.count == 0 && memory.bytes == 0)
    }
}
