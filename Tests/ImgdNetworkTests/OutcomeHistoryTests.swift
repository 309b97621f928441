import ImgdCore
import Testing

@testable import ImgdNetwork

/// `explain`'s memory of outcomes: 8 a key, 4,096 keys, the key written longest ago forgotten first.
@Suite("OutcomeHistory: the bounded ring of each key's last outcomes")
struct OutcomeHistoryTests {
    private static func key(_ number: Int) -> CacheKey { CacheKey(normalizedURL: "http://a/\(number)") }

    private static func record(_ at: Int) -> OutcomeRecord {
        OutcomeRecord(
            at: at, kind: .fetched, code: nil, httpStatus: nil, bytes: at, durationMilliseconds: 1, attempts: 1, viaTier: false,
            cause: .prefetch)
    }

    @Test("a key keeps its last 8 records, oldest first")
    func lastEight() {
        var history = OutcomeHistory()
        for at in 1...13 { history.record(Self.record(at), for: Self.key(0)) }
        #expect(history.records(for: Self.key(0)).map(\.at) == Array(6...13))
        #expect(history.records(for: Self.key(1)).isEmpty)
    }

    @Test("at most 4,096 keys: the key written longest ago goes first, and writing a key again keeps it")
    func keyBound() {
        var history = OutcomeHistory()
        #expect(history.capacity == 4_096)
        for number in 0..<4_096 { history.record(Self.record(number), for: Self.key(number)) }
        #expect(history.count == 4_096)
        // Key 0 written again: now the newest; key 1 is the oldest.
        history.record(Self.record(10_000), for: Self.key(0))
        history.record(Self.record(10_001), for: Self.key(5_000))
        #expect(history.count == 4_096)
        #expect(history.records(for: Self.key(1)).isEmpty)
        #expect(history.records(for: Self.key(0)).map(\.at) == [0, 10_000])
        #expect(history.records(for: Self.key(5_000)).map(\.at) == [10_001])
        // Many more writes of a few keys (stale places in the order) and many new keys: still bounded.
        for round in 0..<20_000 { history.record(Self.record(round), for: Self.key(round % 3)) }
        for number in 6_000..<16_000 { history.record(Self.record(number), for: Self.key(number)) }
        #expect(history.count == 4_096)
        #expect(history.records(for: Self.key(15_999)).map(\.at) == [15_999])
        #expect(history.records(for: Self.key(0)).isEmpty)
    }
}
