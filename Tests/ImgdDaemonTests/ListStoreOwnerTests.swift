import Foundation
import ImgdTestSupport
@testable import ImgdDaemon
import ImgdStore
import Testing

/// The owner of each list (the uid that owned its file when it was claimed), which decides who
/// may `cancel` it: recorded at claim, and NULL for lists of a database made before the column.
@Suite("List store: each list's owner uid", .offThePool)
struct ListStoreOwnerTests {
    static func scratch() throws -> String {
        try ScratchFolder("imgd-owner").path
    }

    @Test("a claim records the owner given; lists and owner(ofList:) return it")
    func recorded() throws {
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ListStore(path: folder + "/state.sqlite")
        let mine = try store.beginClaim(fileName: "a.txt", format: "text", pinMilliseconds: nil, at: 1, owner: 65534)
        let unknown = try store.beginClaim(fileName: "b.txt", format: "text", pinMilliseconds: nil, at: 2)
        #expect(mine.owner == 65534)
        #expect(try store.owner(ofList: mine.id) == 65534)
        #expect(unknown.owner == nil)
        #expect(try store.owner(ofList: unknown.id) == nil)
    }

    @Test("a database made before the owner column gains it; its lists have no owner")
    func migrated() throws {
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/state.sqlite"
        do {
            let old = try SQLiteConnection(path: path)
            try old.execute("""
                CREATE TABLE lists (id INTEGER PRIMARY KEY, name TEXT NOT NULL, claimed_file TEXT NOT NULL,
                    format TEXT NOT NULL, state TEXT NOT NULL, pin_ms INTEGER, total INTEGER NOT NULL DEFAULT 0,
                    pending INTEGER NOT NULL DEFAULT 0, cached INTEGER NOT NULL DEFAULT 0,
                    already_cached INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0,
                    bytes INTEGER NOT NULL DEFAULT 0, claimed_at INTEGER NOT NULL, finished_at INTEGER, finished_file TEXT);
                INSERT INTO lists (name, claimed_file, format, state, claimed_at) VALUES ('old.txt', '1.old.txt', 'text', 'active', 1);
                """)
        }
        let store = try ListStore(path: path)
        let old = try #require(try store.lists().first { $0.name == "old.txt" })
        #expect(old.owner == nil)
        let new = try store.beginClaim(fileName: "new.txt", format: "text", pinMilliseconds: nil, at: 2, owner: 1000)
        #expect(try store.owner(ofList: new.id) == 1000)
    }
}
