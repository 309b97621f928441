import Foundation
import ImgdTestSupport
@testable import ImgdDaemon
import ImgdStore
import Testing

/// `retry` looks a list up, then requeues its failures; the pruner may retire it in between.
@Suite("List store: requeueing a retired list", .offThePool)
struct ListStoreRequeueTests {
    @Test("requeueFailures of a list retired since it was looked up answers nil and touches nothing; of a kept one, how many")
    func retiredListNotRequeued() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ListStore(path: folder + "/state.sqlite")
        var ids: [Int] = []
        for number in 0..<2 {
            let list = try store.beginClaim(fileName: "l\(number).txt", format: "text", pinMilliseconds: nil, at: number)
            try store.addLines(list: list.id, [(1, 1, "http://127.0.0.1/\(number).png", nil)])
            try store.finishClaim(list: list.id)
            try store.record([(list.id, 1, .failed(code: "http_404", message: "not found"))])
            try store.finish(list: list.id, state: .failed, at: number, file: "l\(number).txt")
            ids.append(list.id)
        }
        // The older one is retired (as the pruner does after a list finishes), its rows not yet pruned.
        #expect(try store.retireFinishedLists(keeping: 1) == 1)

        #expect(try store.requeueFailures(list: ids[0]) == nil)
        #expect(try store.failures(list: ids[0]).count == 1)
        #expect(try store.pendingURLs(list: ids[0], after: 0, limit: 10).isEmpty)
        #expect(try store.list(ids[0]) == nil)

        #expect(try store.requeueFailures(list: ids[1]) == 1)
        #expect(try store.list(ids[1])?.state == .active)
    }
}
