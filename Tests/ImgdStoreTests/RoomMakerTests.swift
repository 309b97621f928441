import Foundation
import ImgdCore
import ImgdTestSupport
import Synchronization
import Testing

@testable import ImgdStore

@Suite("Room for arriving bodies", .offThePool)
struct RoomMakerTests {
    /// What each request for room was answered, in the order answered.
    final class Answers: Sendable {
        let list = Mutex<[(String, Bool)]>([])
        func add(_ name: String, _ granted: Bool) { list.withLock { $0.append((name, granted)) } }
        var names: [String] { list.withLock { $0.map(\.0) } }
        func granted(_ name: String) -> Bool? { list.withLock { $0.first { $0.0 == name }?.1 } }
    }

    @Test("a request waiting for the publisher to settle does not hold the housekeeping executor: a later request that fits is answered first")
    func waitForSettleFreesTheExecutor() async throws {
        let scratch = try ScratchFolder("imgd-room")
        defer { scratch.remove() }
        let disk = try DiskCache(root: scratch.path("cache"), limit: 1000)
        defer { try? disk.close() }
        // 900 bytes held by bodies whose rows are not committed: nothing in the index to evict.
        #expect(disk.budget.tryReserve(900))
        let answers = Answers()
        let settleStarted = Atomic<Bool>(false)
        let (gate, openGate) = AsyncStream<Void>.makeStream()
        disk.room.reserve(500, settlingFirst: {
            settleStarted.store(true, ordering: .relaxed)
            for await _ in gate { break }
        }) { granted in answers.add("large", granted) }
        #expect(await eventually(timeout: .seconds(30)) { settleStarted.load(ordering: .relaxed) })
        // While "large" waits for the publisher, the executor is free: a request that fits is
        // answered at once, and the maintainer's kind of work (freeing space) runs too.
        disk.room.reserve(50, settlingFirst: {}) { granted in answers.add("small", granted) }
        disk.room.freeSpace(10) { answers.add("free", true) }
        #expect(await eventually(timeout: .seconds(30)) { answers.names.count == 2 })
        #expect(answers.names == ["small", "free"])
        #expect(answers.granted("small") == true)
        // The publisher commits: the held bytes are settled (released here), and "large" is
        // answered after its second try.
        disk.budget.release(900)
        openGate.yield()
        #expect(await eventually(timeout: .seconds(30)) { answers.names.count == 3 })
        #expect(answers.granted("large") == true)
        #expect(disk.budget.snapshot.reserved == 550)
    }

    @Test("a request that eviction and settling cannot satisfy is refused, once, and reserves nothing")
    func refusedWhenNothingCanGo() async throws {
        let scratch = try ScratchFolder("imgd-room")
        defer { scratch.remove() }
        let disk = try DiskCache(root: scratch.path("cache"), limit: 1000)
        defer { try? disk.close() }
        #expect(disk.budget.tryReserve(900))
        let answers = Answers()
        let settled = Atomic<Int>(0)
        disk.room.reserve(500, settlingFirst: { settled.add(1, ordering: .relaxed) }) { granted in answers.add("large", granted) }
        #expect(await eventually(timeout: .seconds(30)) { answers.names.count == 1 })
        #expect(answers.granted("large") == false)
        #expect(settled.load(ordering: .relaxed) == 1)
        #expect(disk.budget.snapshot.reserved == 900)
    }
}
