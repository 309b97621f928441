import ImgdCore

/// The spill lanes and how many bodies each is writing: a new body goes to the lane with the
/// fewest, so that the two lanes (each a serial queue, one core's worth of hashing and writing)
/// stay equally busy.
///
/// Why not the key's lane, as before: keys are random, so with 16 large bodies arriving at once
/// one lane often had 10 and the other 6; the busier lane then held most of the chunks the
/// ``SpillGate`` lets wait, the transfer loop waited at the gate for it, and the other lane ran
/// dry. A body stays on its lane from its first chunk to its rename (its chunks must be hashed in
/// order); two bodies of one key never overlap (a key's job publishes before another starts), so
/// nothing needs a key's bodies on one lane.
final class SpillLanes: Sendable {
    /// The lanes, in order; ``BodyPublisher/drainSpills()`` waits on each.
    let executors: [QueueExecutor]
    /// Bodies taken and not yet given back, per lane.
    private let active: Locked<[Int]>

    init(count: Int) {
        executors = (0..<count).map { QueueExecutor(label: "imgd-spill-\($0)") }
        active = Locked([Int](repeating: 0, count: count))
    }

    /// The lane with the fewest bodies in progress (the first of equals), counted as taken.
    func take() -> Int {
        active.withLock { counts in
            let lane = counts.indices.min { counts[$0] < counts[$1] }!
            counts[lane] += 1
            return lane
        }
    }

    /// A body on `lane` is done (published, failed or discarded).
    func giveBack(_ lane: Int) {
        active.withLock { $0[lane] -= 1 }
    }

    /// Bodies in progress per lane, for tests.
    var bodiesInProgress: [Int] { active.withLock { $0 } }
}
