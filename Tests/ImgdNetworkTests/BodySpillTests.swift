import Dispatch
import Foundation
import ImgdCore
import ImgdStore
import ImgdTestSupport
import Synchronization
import Testing

@testable import ImgdNetwork

/// The spill lanes on their own: order, digest, and the cap on chunks waiting for the disk.
@Suite("Spill lanes", .timeLimit(.minutes(5)), .offThePool)
struct BodySpillTests {
    @Test("chunks past the gate's limit wait for the lane; all arrive in order, with the body's digest")
    func gateHoldsTheLoop() async throws {
        let root = try ScratchFolder("imgd-spill").path("cache")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let cache = try CacheDirectory(root: root)
        let lanes = SpillLanes(count: 1)
        let lane = lanes.executors[0]
        let spill = BodySpill(
            lanes: lanes, cache: cache, key: try ImageURL("http://example.com/big.png").cacheKey, declaredLength: nil,
            gate: SpillGate())
        let chunks = (0...SpillGate.limit).map { index in [UInt8](repeating: UInt8(index % 251), count: 1000) }

        // The disk is stuck: the lane does nothing until resumed.
        lane.queue.suspend()
        let handedOver = Counter()
        let appending = Task {
            await onOwnThread {
                for chunk in chunks {
                    spill.append(chunk)
                    handedOver.value.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(await eventually { handedOver.value.load(ordering: .relaxed) == SpillGate.limit })
        // Asserting that something does not happen needs a little time: the one chunk past the
        // limit is still held back while the lane is stuck.
        try await Task.sleep(for: .milliseconds(100))
        #expect(handedOver.value.load(ordering: .relaxed) == SpillGate.limit)

        lane.queue.resume()
        await appending.value
        #expect(handedOver.value.load(ordering: .relaxed) == chunks.count)
        let tail: [UInt8] = [1, 2, 3]
        // On the lane, as the publisher finishes a spilled body: the temp file stays there.
        let (digest, written) = try lane.queue.sync {
            try spill.assumeIsolated { spill in
                let (file, digest, _) = try spill.finish(tail: tail)
                defer { file.discard() }
                return (digest, try Array(Data(contentsOf: URL(fileURLWithPath: file.path))))
            }
        }
        let expected = chunks.flatMap { $0 } + tail
        #expect(digest == SHA256Digest(of: expected))
        #expect(written == expected)
    }

    @Test("a discarded spill leaves no temp file, chunks still queued included")
    func discardDropsQueuedChunks() throws {
        let root = try ScratchFolder("imgd-spill").path("cache")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let cache = try CacheDirectory(root: root)
        let lanes = SpillLanes(count: 1)
        let lane = lanes.executors[0]
        let spill = BodySpill(
            lanes: lanes, cache: cache, key: try ImageURL("http://example.com/gone.png").cacheKey, declaredLength: nil,
            gate: SpillGate())
        spill.append([UInt8](repeating: 1, count: 1000))
        lane.queue.sync {}  // the first chunk is in its temp file
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.tempFolder).count == 1)
        lane.queue.suspend()
        spill.append([UInt8](repeating: 2, count: 1000))
        lane.queue.resume()
        spill.discard()
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.tempFolder).isEmpty)
        #expect(spill.failure == nil)
    }
}

extension BodySpillTests {
    @Test(
        "a PNG of declared length is walked on its lane as it is written: its validation takes the walk; without a declared length there is none",
        arguments: [true, false])
    func pngIsWalkedAsItArrives(declared: Bool) throws {
        let root = try ScratchFolder("imgd-spill").path("cache")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let cache = try CacheDirectory(root: root)
        let lanes = SpillLanes(count: 1)
        let lane = lanes.executors[0]
        let png = TestImages.png(bytes: 300_000, width: 32, height: 32)
        let spill = BodySpill(
            lanes: lanes, cache: cache, key: try ImageURL("http://example.com/walked.png").cacheKey,
            declaredLength: declared ? png.count : nil, gate: SpillGate())
        // As the transfer hands them over: full 64 KiB buffers, then the tail at the end.
        let chunkSize = 64 * 1024
        let full = png.count / chunkSize * chunkSize
        for start in stride(from: 0, to: full, by: chunkSize) { spill.append(Array(png[start..<start + chunkSize])) }
        let (walk, info) = try lane.queue.sync {
            try spill.assumeIsolated { spill in
                let (file, _, walk) = try spill.finish(tail: Array(png[full...]))
                defer { file.discard() }
                return (walk, try ImageValidator().validate(FileByteSource(fileDescriptor: file.fileDescriptor, count: png.count), walked: walk))
            }
        }
        #expect(info == ImageInfo(format: .png, width: 32, height: 32))
        #expect((walk != nil) == declared)
        #expect(walk.map { $0.received == png.count && $0.bodyCount == png.count } ?? true)
    }
}

extension BodySpillTests {
    @Test("each new body goes to the lane with the fewest in progress, whatever its key; a finished or discarded body counts out once")
    func bodiesGoToTheLessBusyLane() throws {
        let root = try ScratchFolder("imgd-spill").path("cache")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let cache = try CacheDirectory(root: root)
        let lanes = SpillLanes(count: 2)
        // Keys that all fall in one fan-out bucket, as the key's lane would have had them.
        var keys: [CacheKey] = []
        var index = 0
        while keys.count < 4 {
            let key = try ImageURL("http://example.com/\(index).png").cacheKey
            if key.fanOutBucket % 2 == 0 { keys.append(key) }
            index += 1
        }
        let spills = keys.map { BodySpill(lanes: lanes, cache: cache, key: $0, declaredLength: nil, gate: SpillGate()) }
        #expect(lanes.bodiesInProgress == [2, 2])
        #expect(Set(spills.map { ObjectIdentifier($0.lane) }).count == 2)
        spills[0].append([1, 2, 3])
        let laneOfFirst = spills[0].lane
        try laneOfFirst.queue.sync { try spills[0].assumeIsolated { spill in try spill.finish(tail: []).file.discard() } }
        spills[0].discard()  // after its finish: counted out once only
        spills[1].discard()
        #expect(lanes.bodiesInProgress.reduce(0, +) == 2)
        // The next body goes to the lane that has fewer now.
        let next = BodySpill(lanes: lanes, cache: cache, key: keys[0], declaredLength: nil, gate: SpillGate())
        let counts = lanes.bodiesInProgress
        #expect(counts.reduce(0, +) == 3 && counts.max()! - counts.min()! <= 1, "\(counts)")
        next.discard()
    }
}

extension BodySpillTests {
    @Test("a full gate holds the loop until the lanes have written half of what waited, not just one chunk")
    func gateResumesAtHalf() async throws {
        let gate = SpillGate()
        for _ in 0..<SpillGate.limit { gate.enter() }
        let entered = Counter()
        let waiting = Task {
            await onOwnThread {
                gate.enter()
                entered.value.add(1, ordering: .relaxed)
            }
        }
        #expect(await eventually { gate.waitingCallers == 1 })
        // All but the last chunk that takes the queue down to half: still held.
        for _ in 0..<(SpillGate.limit - SpillGate.resumeAt - 1) { gate.leave() }
        // Asserting that something does not happen needs a little time.
        try await Task.sleep(for: .milliseconds(100))
        #expect(entered.value.load(ordering: .relaxed) == 0)
        gate.leave()
        await waiting.value
        #expect(entered.value.load(ordering: .relaxed) == 1)
        // Counted in: the gate is full again only after another half's worth.
        for _ in 0..<(SpillGate.limit - SpillGate.resumeAt - 1) { gate.enter() }
        for _ in 0..<SpillGate.limit { gate.leave() }
    }
}

/// A counter both the test and the appending thread can hold.
private final class Counter: Sendable {
    let value = Atomic<Int>(0)
}
