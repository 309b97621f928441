import Foundation
import ImgdTestSupport
@testable import ImgdDaemon
import ImgdStore
import Testing

/// List ids are never reused: an abandoned claim's id stays with its URL rows until the pruner
/// has deleted them, and a list claimed meanwhile must not share it (the pruner would delete its
/// rows, and the list would stay active with nothing left to fetch).
@Suite("List store: list ids are never reused", .offThePool)
struct ListStoreIDTests {
    private static func lines(_ count: Int, from first: Int = 1) -> [(seq: Int, line: Int, url: String, failure: (code: String, message: String)?)] {
        (first..<(first + count)).map { ($0, $0, "http://127.0.0.1/img/\($0).png", nil) }
    }

    @Test("abandon → beginClaim → prune: the new list gets a new id and keeps every row")
    func abandonedIDNotReused() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ListStore(path: folder + "/state.sqlite")
        let old = try store.beginClaim(fileName: "big.txt", format: "text", pinMilliseconds: nil, at: 1)
        try store.addLines(list: old.id, Self.lines(12_000))
        try store.abandonClaim(list: old.id)

        let new = try store.beginClaim(fileName: "big.txt", format: "text", pinMilliseconds: nil, at: 2)
        #expect(new.id != old.id)
        #expect(new.claimedFile == "\(new.id).big.txt")
        try store.addLines(list: new.id, Self.lines(7_000))
        try store.finishClaim(list: new.id)
        while try store.pruneBatch(limit: 5_000) {}

        #expect(try store.pendingURLs(list: new.id, after: 0, limit: 10_000).count == 7_000)
        #expect(try store.pendingURLs(list: old.id, after: 0, limit: 10).isEmpty)
        let record = try #require(try store.list(new.id))
        #expect(record.total == 7_000 && record.pending == 7_000 && record.state == .active)
    }

    @Test("once an abandoned id's rows are gone, the next list still gets a new id (the counter survives a reopen)")
    func counterSurvivesPruneAndReopen() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/state.sqlite"
        let old: Int
        do {
            let store = try ListStore(path: path)
            old = try store.beginClaim(fileName: "a.txt", format: "text", pinMilliseconds: nil, at: 1).id
            try store.addLines(list: old, Self.lines(10))
            try store.abandonClaim(list: old)
            while try store.pruneBatch(limit: 5_000) {}
        }
        let store = try ListStore(path: path)
        let new = try store.beginClaim(fileName: "a.txt", format: "text", pinMilliseconds: nil, at: 2)
        #expect(new.id > old)
    }

    @Test("a database made before the counter, with an abandoned id still being pruned: the next id is above it")
    func existingDatabase() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/state.sqlite"
        do {
            let old = try SQLiteConnection(path: path)
            try old.execute("""
                CREATE TABLE list_urls (list_id INTEGER NOT NULL, seq INTEGER NOT NULL, line INTEGER NOT NULL,
                    url TEXT NOT NULL, state INTEGER NOT NULL, code TEXT, message TEXT, bytes INTEGER,
                    PRIMARY KEY (list_id, seq)) WITHOUT ROWID;
                CREATE TABLE pruning (list_id INTEGER PRIMARY KEY);
                INSERT INTO pruning VALUES (7);
                INSERT INTO list_urls VALUES (7, 1, 1, 'http://127.0.0.1/a.png', 0, NULL, NULL, NULL);
                """)
        }
        let store = try ListStore(path: path)
        let new = try store.beginClaim(fileName: "a.txt", format: "text", pinMilliseconds: nil, at: 2)
        #expect(new.id == 8)
    }
}
