import Foundation
import ImgdCore
import ImgdTestSupport
@testable import ImgdDaemon
import ImgdStore
import Testing

/// The state database keeps each item's signed-URL expiry from the claim: the pending reads take
/// the expiring items soonest first (list order among equals, through a cursor), `retry` leaves
/// expired items failed, and a database made before the column gains it.
@Suite("List store: expiring URLs", .offThePool)
struct ListStoreExpiryTests {
    static func cloudFront(_ path: String, expiresAt seconds: Int) -> String {
        "http://127.0.0.1\(path)?Expires=\(seconds)&Signature=s"
    }

    @Test("expiring items are read soonest first, ties in list order, page by page; the rest and the high items are read apart")
    func expiringOrder() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ListStore(path: folder + "/state.sqlite")
        let list = try store.beginClaim(fileName: "e.txt", format: "text", pinMilliseconds: nil, at: 1)
        let high = LinkListItemOptions(isHighPriority: true)
        try store.addLines(list: list.id, [
            (1, 1, "http://127.0.0.1/plain.png", nil, .none),
            (2, 2, Self.cloudFront("/late.png", expiresAt: 2_000_000_000), nil, .none),
            (3, 3, Self.cloudFront("/tie-a.png", expiresAt: 1_900_000_000), nil, .none),
            (4, 4, Self.cloudFront("/urgent.png", expiresAt: 1_000_000_000), nil, high),
            (5, 5, "http://127.0.0.1/garbage.png?Expires=soon&Signature=s", nil, .none),
            (6, 6, Self.cloudFront("/tie-b.png", expiresAt: 1_900_000_000), nil, .none),
            (7, 7, Self.cloudFront("/gone.png", expiresAt: 1_000), nil, .none),
            (8, 8, Self.cloudFront("/bad-line.png", expiresAt: 1_000), (code: "bad_url", message: "x"), .none),
        ])
        try store.finishClaim(list: list.id)
        var read: [PendingURL] = []
        var cursor: (expiresAt: Int, seq: Int)?
        while let next = try store.pendingExpiringURLs(list: list.id, after: cursor, limit: 1).first {
            read.append(next)
            cursor = (next.expiresAt!, next.seq)
        }
        #expect(read.map(\.seq) == [7, 3, 6, 2])
        #expect(read.map(\.expiresAt) == [1_000_000, 1_900_000_000_000, 1_900_000_000_000, 2_000_000_000_000])
        #expect(try store.pendingExpiringURLs(list: list.id, after: nil, limit: 10).map(\.seq) == [7, 3, 6, 2])
        #expect(try store.pendingURLs(list: list.id, after: 0, limit: 10).map(\.seq) == [1, 5])
        #expect(try store.pendingURLs(list: list.id, after: 0, limit: 10, high: true).map(\.seq) == [4])
    }

    @Test("retry leaves url_expired items failed (and says how many); the report's reading gives their URL, line and expiry")
    func requeueSkipsExpired() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ListStore(path: folder + "/state.sqlite")
        let list = try store.beginClaim(fileName: "r.txt", format: "text", pinMilliseconds: nil, at: 1)
        let gone = Self.cloudFront("/gone.png", expiresAt: 1_000)
        try store.addLines(list: list.id, [(1, 1, gone, nil), (2, 2, "http://127.0.0.1/missing.png", nil)])
        try store.finishClaim(list: list.id)
        try store.record([
            (list.id, 1, .failed(code: "url_expired", message: "expired")), (list.id, 2, .failed(code: "http_404", message: "no")),
        ])
        #expect(try store.requeueFailures(list: list.id) == 1)
        #expect(try store.failureCounts(list: list.id) == ["url_expired": 1])
        let expired = try store.expiredURLs(list: list.id, after: 0, limit: 10)
        #expect(expired.map(\.url) == [gone])
        #expect(expired.map(\.line) == [1])
        #expect(expired.map(\.expiresAt) == [1_000_000])
    }

    @Test("a database made before the expiry column gains it: its pending items are read as the rest, new ones with their expiry")
    func migrated() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/state.sqlite"
        do {
            let old = try SQLiteConnection(path: path)
            try old.execute("""
                CREATE TABLE lists (id INTEGER PRIMARY KEY, name TEXT NOT NULL, claimed_file TEXT NOT NULL,
                    format TEXT NOT NULL, state TEXT NOT NULL, pin_ms INTEGER, total INTEGER NOT NULL DEFAULT 0,
                    pending INTEGER NOT NULL DEFAULT 0, cached INTEGER NOT NULL DEFAULT 0,
                    already_cached INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0,
                    bytes INTEGER NOT NULL DEFAULT 0, claimed_at INTEGER NOT NULL, finished_at INTEGER, finished_file TEXT,
                    owner INTEGER, refresh TEXT);
                CREATE TABLE list_urls (list_id INTEGER NOT NULL, seq INTEGER NOT NULL, line INTEGER NOT NULL, url TEXT NOT NULL,
                    state INTEGER NOT NULL, code TEXT, message TEXT, bytes INTEGER, item_key TEXT, sha256 TEXT, pin_ms INTEGER,
                    high INTEGER, refresh TEXT, PRIMARY KEY (list_id, seq)) WITHOUT ROWID;
                INSERT INTO lists (id, name, claimed_file, format, state, claimed_at, total, pending)
                    VALUES (1, 'old.txt', '1.old.txt', 'text', 'active', 1, 1, 1);
                INSERT INTO list_urls (list_id, seq, line, url, state)
                    VALUES (1, 1, 1, 'http://127.0.0.1/a.png?Expires=1000&Signature=s', 0);
                """)
        }
        let store = try ListStore(path: path)
        #expect(try store.pendingURLs(list: 1, after: 0, limit: 10).map(\.seq) == [1])
        #expect(try store.pendingExpiringURLs(list: 1, after: nil, limit: 10).isEmpty)
        let new = try store.beginClaim(fileName: "new.txt", format: "text", pinMilliseconds: nil, at: 2)
        try store.addLines(list: new.id, [(1, 1, Self.cloudFront("/b.png", expiresAt: 5), nil)])
        #expect(try store.pendingExpiringURLs(list: new.id, after: nil, limit: 10).map(\.expiresAt) == [5_000])
    }
}
