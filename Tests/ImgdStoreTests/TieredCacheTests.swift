import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdStore

@Suite("Two tiers", .offThePool)
struct TieredCacheTests {
    @Test("a disk hit fills the memory tier; the next hit comes from memory without the index")
    func diskThenMemory() throws {
        let fixture = try CacheFixture()
        defer { fixture.remove() }
        let entries = try fixture.fill(2)
        let tiers = TieredCache(memory: MemoryCache(limitBytes: 1 << 20), disk: fixture.disk)
        let first = try #require(tiers.lookup(entries[0].key, needs: .bytes))
        #expect(first.source == .disk)
        #expect(first.bytes == [UInt8](repeating: 0, count: 100))
        let second = try #require(tiers.lookup(entries[0].key, needs: .file))
        #expect(second.source == .memory)
        #expect(second.entry == first.entry)
        #expect(tiers.memory.statistics.hits == 1)
        #expect(tiers.lookup(try ImageURL("http://example.com/none.png").cacheKey, needs: .file) == nil)
        // Hits count as uses for the disk tier's LRU order.
        try fixture.disk.index.flushAccesses()
        #expect(try fixture.disk.index.entry(for: entries[0].key)?.hitCount == 2)
    }

    @Test("a memory copy of a file evicted from disk is not handed out as a path, but its bytes still serve")
    func evictedFromDisk() throws {
        let fixture = try CacheFixture()
        defer { fixture.remove() }
        let entries = try fixture.fill(2)
        let tiers = TieredCache(memory: MemoryCache(limitBytes: 1 << 20), disk: fixture.disk)
        _ = tiers.lookup(entries[0].key, needs: .bytes)
        _ = tiers.lookup(entries[1].key, needs: .bytes)
        try FileManager.default.removeItem(atPath: fixture.disk.directory.path(for: entries[0].key))
        try FileManager.default.removeItem(atPath: fixture.disk.directory.path(for: entries[1].key))
        #expect(tiers.lookup(entries[0].key, needs: .bytes)?.source == .memory)
        #expect(tiers.lookup(entries[1].key, needs: .file) == nil)
        #expect(tiers.memory.statistics.entries == 1)
    }

    @Test("an image over 1/8 of the memory limit is served from disk and not kept")
    func largeStaysOnDisk() throws {
        let fixture = try CacheFixture()
        defer { fixture.remove() }
        let entries = try fixture.fill(1, size: 2000)
        let tiers = TieredCache(memory: MemoryCache(limitBytes: 8000), disk: fixture.disk)
        #expect(tiers.lookup(entries[0].key, needs: .bytes)?.bytes?.count == 2000)
        #expect(tiers.lookup(entries[0].key, needs: .bytes)?.source == .disk)
        #expect(tiers.memory.statistics.entries == 0)
    }
}
