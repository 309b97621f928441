import Foundation
import ImgdTestSupport
@testable import ImgdDaemon
import ImgdStore
import Testing

/// The daemon's state database (``ListStore``) through a list's whole life, on a real SQLite
/// file in a scratch folder: a claim, its lines, progress in batches, cancellation, the finish,
/// a retry, retirement and pruning; then the same database opened again after a clean close and
/// after a process that died with its last commits only in the WAL.
@Suite("List store: a list's life, reopened after a close and after a crash", .offThePool)
struct ListStoreLifecycleTests {
    typealias Line = (seq: Int, line: Int, url: String, failure: (code: String, message: String)?)

    static func lines(_ seqs: ClosedRange<Int>, prefix: String = "img") -> [Line] {
        seqs.map { ($0, $0 + 1, "http://127.0.0.1/\(prefix)/\($0).png", nil) }
    }

    @Test("claim, lines, progress, finish: the counters always add up to the rows, and a URL answered twice counts once")
    func life() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ListStore(path: folder + "/state.sqlite")
        #expect(store.reclaimsSpace, "a new database gives freed pages back")

        let claimed = try store.beginClaim(fileName: "links.txt", format: "text", pinMilliseconds: nil, at: 1_000, owner: 1000)
        #expect(claimed.state == .claiming && claimed.total == 0 && claimed.claimedAt == 1_000)
        #expect(claimed.name == "links.txt" && claimed.claimedFile == "\(claimed.id).links.txt" && claimed.format == "text")
        try store.addLines(list: claimed.id, Self.lines(1...4) + [(5, 7, "not a url", ("bad_url", "not a URL: not a url"))])
        try store.setPin(list: claimed.id, milliseconds: 3_600_000)
        try store.finishClaim(list: claimed.id)
        var record = try #require(try store.list(claimed.id))
        #expect(record.state == .active && record.pinMilliseconds == 3_600_000)
        #expect(record.total == 5 && record.pending == 4 && record.failed == 1)

        // The pending URLs in list order, a page at a time from a cursor; the bad line is not among them.
        let first = try store.pendingURLs(list: claimed.id, after: 0, limit: 3)
        #expect(first.map { $0.seq } == [1, 2, 3])
        #expect(try store.pendingURLs(list: claimed.id, after: 3, limit: 3).map { $0.seq } == [4])

        try store.record([
            (claimed.id, 1, .cached(bytes: 100)), (claimed.id, 2, .alreadyCached(bytes: 50)),
            (claimed.id, 3, .failed(code: "http_404", message: "not found")),
        ])
        // Answered again (a duplicate answer, or one after a cancel): ignored, counters unchanged.
        try store.record([(claimed.id, 1, .cached(bytes: 100)), (claimed.id, 3, .cached(bytes: 7))])
        record = try #require(try store.list(claimed.id))
        #expect(record.pending == 1 && record.cached == 1 && record.alreadyCached == 1 && record.failed == 2)
        #expect(record.bytes == 100, "bytes count what was downloaded for the list")
        #expect(record.total == record.pending + record.cached + record.alreadyCached + record.failed)
        #expect(try store.pendingURLs(list: claimed.id, after: 0, limit: 10).map { $0.seq } == [4])

        try store.record([(claimed.id, 4, .cached(bytes: 1))])
        try store.finish(list: claimed.id, state: .failed, at: 2_000, file: "links.txt")
        record = try #require(try store.list(claimed.id))
        #expect(record.state == .failed && record.finishedAt == 2_000 && record.finishedFile == "links.txt" && record.pending == 0)
        #expect(try store.failures(list: claimed.id) == [
            ListFailure(line: 4, url: "http://127.0.0.1/img/3.png", code: "http_404", message: "not found"),
            ListFailure(line: 7, url: "not a url", code: "bad_url", message: "not a URL: not a url"),
        ])
        #expect(try store.failureCounts(list: claimed.id) == ["http_404": 1, "bad_url": 1])
        #expect(try store.failures(list: claimed.id, after: 3, limit: 10).map { $0.seq } == [5])

        // retry: the fetch failure goes back to pending, the bad line does not; the list is active again.
        #expect(try store.requeueFailures(list: claimed.id) == 1)
        record = try #require(try store.list(claimed.id))
        #expect(record.state == .active && record.finishedAt == nil && record.pending == 1 && record.failed == 1)
        #expect(try store.pendingURLs(list: claimed.id, after: 0, limit: 10).map { $0.url } == ["http://127.0.0.1/img/3.png"])
    }

    @Test("a name is unique among lists in progress (~2, ~3); a finished list gives its name back")
    func uniqueNames() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ListStore(path: folder + "/state.sqlite")
        let one = try store.beginClaim(fileName: "a.txt", format: "text", pinMilliseconds: nil, at: 1)
        let two = try store.beginClaim(fileName: "a.txt", format: "text", pinMilliseconds: nil, at: 2)
        try store.finishClaim(list: two.id)
        let three = try store.beginClaim(fileName: "a.txt", format: "json", pinMilliseconds: 5, at: 3)
        #expect([one.name, two.name, three.name] == ["a.txt", "a.txt~2", "a.txt~3"])
        #expect(Set([one.claimedFile, two.claimedFile, three.claimedFile]).count == 3)

        try store.finish(list: one.id, state: .done, at: 4, file: "a.txt")
        #expect(try store.beginClaim(fileName: "a.txt", format: "text", pinMilliseconds: nil, at: 5).name == "a.txt")
        // Most recent first; in progress and finished alike.
        #expect(try store.lists().map(\.name) == ["a.txt", "a.txt~3", "a.txt~2", "a.txt"])
    }

    @Test("cancel: every pending URL fails as cancelled, once; what was answered before stays as it was")
    func cancelled() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ListStore(path: folder + "/state.sqlite")
        let list = try store.beginClaim(fileName: "c.txt", format: "text", pinMilliseconds: nil, at: 1)
        try store.addLines(list: list.id, Self.lines(1...10))
        try store.finishClaim(list: list.id)
        try store.record([(list.id, 1, .cached(bytes: 10)), (list.id, 2, .cached(bytes: 10))])
        #expect(try store.failPending(list: list.id, code: "cancelled", message: "the list was cancelled") == 8)
        #expect(try store.failPending(list: list.id, code: "cancelled", message: "again") == 0)
        let record = try #require(try store.list(list.id))
        #expect(record.pending == 0 && record.cached == 2 && record.failed == 8)
        #expect(try store.failureCounts(list: list.id) == ["cancelled": 8])
        // An answer arriving after the cancel does not move the counters.
        try store.record([(list.id, 3, .cached(bytes: 10))])
        #expect(try store.list(list.id)?.cached == 2)
    }

    @Test("only the last 100 finished lists are kept; retired ones lose their rows in batches and the pages go back")
    func retireAndPrune() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ListStore(path: folder + "/state.sqlite")
        var ids: [Int] = []
        for number in 0..<(ListStore.keptFinishedLists + 3) {
            let list = try store.beginClaim(fileName: "l\(number).txt", format: "text", pinMilliseconds: nil, at: number)
            try store.addLines(list: list.id, Self.lines(1...(number < 3 ? 3_000 : 1), prefix: "l\(number)"))
            try store.finishClaim(list: list.id)
            try store.finish(list: list.id, state: .done, at: number, file: "l\(number).txt")
            ids.append(list.id)
        }
        let active = try store.beginClaim(fileName: "running.txt", format: "text", pinMilliseconds: nil, at: 999)
        try store.finishClaim(list: active.id)

        #expect(try store.retireFinishedLists() == 3)
        #expect(try store.retireFinishedLists() == 0)
        let shown = try store.lists(finishedLimit: Int.max)
        #expect(shown.count == ListStore.keptFinishedLists + 1)
        #expect(shown.first?.id == active.id, "the list in progress stays, whatever its age")
        #expect(!shown.contains { ids.prefix(3).contains($0.id) }, "the three oldest finished lists are retired")
        #expect(try store.lists(finishedLimit: 2).map(\.id) == [active.id, ids[ids.count - 1], ids[ids.count - 2]])

        // Their rows go a batch at a time: 9,000 rows in batches of 1,000.
        var batches = 0
        while try store.pruneBatch(limit: 1_000) { batches += 1 }
        #expect(batches >= 9)
        for id in ids.prefix(3) { #expect(try store.pendingURLs(list: id, after: 0, limit: 1).isEmpty) }
        try store.checkpoint()
        #expect(try store.size().free > 0, "the deleted rows' pages are free")
        while try store.reclaimSpace(pages: 64) {}
        #expect(try store.size().free == 0, "and given back to the filesystem")
    }

    @Test("closed and opened again: every list, counter, row and outcome is as it was, and ids go on from there")
    func reopenAfterClose() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/state.sqlite"
        let before: [ListRecord]
        let id: Int
        do {
            let store = try ListStore(path: path)
            id = try store.beginClaim(fileName: "kept.txt", format: "plist", pinMilliseconds: 60_000, at: 10, owner: 42).id
            try store.addLines(list: id, Self.lines(1...2_500))
            try store.finishClaim(list: id)
            try store.record((1...1_000).map { (id, $0, ListURLOutcome.cached(bytes: $0)) })
            try store.record([(id, 1_001, .failed(code: "timeout", message: "slow"))])
            before = try store.lists()
        }
        let store = try ListStore(path: path)
        #expect(try store.lists() == before)
        let record = try #require(before.first)
        #expect(record.pending == 1_499 && record.cached == 1_000 && record.failed == 1 && record.owner == 42)
        #expect(try store.pendingURLs(list: id, after: 0, limit: 1).map { $0.seq } == [1_002], "progress resumes after the last answer")
        #expect(try store.failures(list: id).map(\.code) == ["timeout"])
        #expect(try store.beginClaim(fileName: "next.txt", format: "text", pinMilliseconds: nil, at: 11).id > id)
    }

    @Test("a process that died mid-list (its files copied as they were, WAL not checkpointed): every commit is there, and the half-made claim is dropped cleanly")
    func reopenAfterCrash() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/state.sqlite"
        let crashed = folder + "/crashed"
        try FileManager.default.createDirectory(atPath: crashed, withIntermediateDirectories: true)
        let store = try ListStore(path: path)
        let warming = try store.beginClaim(fileName: "warming.txt", format: "text", pinMilliseconds: nil, at: 1)
        try store.addLines(list: warming.id, Self.lines(1...100))
        try store.finishClaim(list: warming.id)
        try store.record((1...40).map { (warming.id, $0, ListURLOutcome.cached(bytes: 1)) })
        // A second claim the process died in the middle of: its row says claiming, half its lines are in.
        let halfClaimed = try store.beginClaim(fileName: "half.txt", format: "text", pinMilliseconds: nil, at: 2)
        try store.addLines(list: halfClaimed.id, Self.lines(1...50, prefix: "half"))
        // What a SIGKILL leaves: the database and its WAL as they are on disk, the connection never closed.
        for suffix in ["", "-wal"] {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: crashed + "/state.sqlite" + suffix)
        }
        #expect(FileManager.default.fileExists(atPath: crashed + "/state.sqlite-wal"), "the commits were in the WAL")

        let reopened = try ListStore(path: crashed + "/state.sqlite")
        let lists = try reopened.lists()
        #expect(lists.map(\.state) == [.claiming, .active])
        let resumed = try #require(lists.first { $0.id == warming.id })
        #expect(resumed.pending == 60 && resumed.cached == 40 && resumed.total == 100)
        #expect(try reopened.pendingURLs(list: warming.id, after: 0, limit: 1).map { $0.seq } == [41])

        // What the spool does with a claim found half-made: drop it, prune its rows, claim the file anew.
        try reopened.abandonClaim(list: halfClaimed.id)
        while try reopened.pruneBatch(limit: 20) {}
        let again = try reopened.beginClaim(fileName: "half.txt", format: "text", pinMilliseconds: nil, at: 3)
        #expect(again.id != halfClaimed.id && again.name == "half.txt" && again.total == 0)
        #expect(try reopened.pendingURLs(list: halfClaimed.id, after: 0, limit: 1).isEmpty)
        #expect(try reopened.pendingURLs(list: warming.id, after: 0, limit: 100).count == 60, "the other list lost nothing")
    }
}
