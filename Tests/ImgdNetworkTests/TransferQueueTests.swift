import ImgdTestSupport
import Testing

@testable import ImgdNetwork

@Suite("Transfer queue order", .offThePool)
struct TransferQueueTests {
    final class Item {
        let name: String
        let host: String
        var isLive = true
        init(_ name: String, host: String = "a") {
            self.name = name
            self.host = host
        }
    }

    private func drain(_ queue: inout TransferQueue<Item>, blockedHosts: Set<String> = []) -> [String] {
        var order: [String] = []
        while let item = queue.next(isLive: { $0.isLive }, canStart: { !blockedHosts.contains($0.host) }) {
            order.append(item.name)
        }
        return order
    }

    @Test("higher priority first; FIFO within one submitter")
    func priorityThenFIFO() {
        var queue = TransferQueue<Item>()
        let list = SubmitterID(rawValue: 1)
        queue.enqueue(Item("p1"), priority: .prefetch, submitter: list)
        queue.enqueue(Item("p2"), priority: .prefetch, submitter: list)
        queue.enqueue(Item("d1"), priority: .onDemand, submitter: .interactive)
        #expect(drain(&queue) == ["d1", "p1", "p2"])
    }

    @Test("a held submitter's prefetches are passed over, kept and released in order; its on-demand jobs go; it is not counted as waiting")
    func heldSubmitter() {
        var queue = TransferQueue<Item>()
        let night = SubmitterID(rawValue: 1), day = SubmitterID(rawValue: 2)
        queue.enqueue(Item("n1"), priority: .prefetch, submitter: night)
        queue.enqueue(Item("n2"), priority: .prefetch, submitter: night)
        queue.enqueue(Item("d1"), priority: .prefetch, submitter: day)
        queue.enqueue(Item("n-get"), priority: .onDemand, submitter: night)
        queue.hold(night, true)
        #expect(queue.submitters(at: .prefetch) == [day])
        #expect(drain(&queue) == ["n-get", "d1"])
        #expect(queue.hasEntries(at: .prefetch))
        queue.hold(night, false)
        #expect(queue.submitters(at: .prefetch) == [night])
        #expect(drain(&queue) == ["n1", "n2"])
    }

    @Test("submitters take turns; a newcomer waits at most one turn")
    func roundRobin() {
        var queue = TransferQueue<Item>()
        for index in 1...4 { queue.enqueue(Item("a\(index)"), priority: .prefetch, submitter: SubmitterID(rawValue: 1)) }
        let first = queue.next(isLive: { _ in true }, canStart: { _ in true })
        #expect(first?.name == "a1")
        for index in 1...2 { queue.enqueue(Item("b\(index)"), priority: .prefetch, submitter: SubmitterID(rawValue: 2)) }
        #expect(drain(&queue) == ["a2", "b1", "a3", "b2", "a4"])
    }

    @Test("a weighted submitter (a list at risk) takes that many jobs at its turn; the others keep theirs; weight 1 restores plain turns; on-demand ignores weights")
    func weightedTurns() {
        var queue = TransferQueue<Item>()
        let late = SubmitterID(rawValue: 1), calm = SubmitterID(rawValue: 2), other = SubmitterID(rawValue: 3)
        for index in 1...9 { queue.enqueue(Item("l\(index)"), priority: .prefetch, submitter: late) }
        for index in 1...3 { queue.enqueue(Item("c\(index)"), priority: .prefetch, submitter: calm) }
        for index in 1...3 { queue.enqueue(Item("o\(index)"), priority: .prefetch, submitter: other) }
        queue.weigh(late, 3)
        #expect(queue.weight(of: late) == 3 && queue.weight(of: calm) == 1)
        var order: [String] = []
        for _ in 0..<10 {
            guard let item = queue.next(isLive: { $0.isLive }, canStart: { _ in true }) else { break }
            order.append(item.name)
        }
        #expect(order == ["l1", "l2", "l3", "c1", "o1", "l4", "l5", "l6", "c2", "o2"])
        // Back to weight 1: plain turns again.
        queue.weigh(late, 1)
        #expect(queue.weights.isEmpty)
        #expect(drain(&queue) == ["l7", "c3", "o3", "l8", "l9"])
        // On demand, weights do not apply: submitters alternate.
        var demand = TransferQueue<Item>()
        for index in 1...3 { demand.enqueue(Item("a\(index)"), priority: .onDemand, submitter: late) }
        for index in 1...3 { demand.enqueue(Item("b\(index)"), priority: .onDemand, submitter: calm) }
        demand.weigh(late, 4)
        #expect(drain(&demand) == ["a1", "b1", "a2", "b2", "a3", "b3"])
    }

    @Test("a job whose host is blocked is passed over, not lost")
    func hostBlocked() {
        var queue = TransferQueue<Item>()
        let list = SubmitterID(rawValue: 1)
        queue.enqueue(Item("x1", host: "x"), priority: .prefetch, submitter: list)
        queue.enqueue(Item("y1", host: "y"), priority: .prefetch, submitter: list)
        queue.enqueue(Item("x2", host: "x"), priority: .prefetch, submitter: list)
        #expect(drain(&queue, blockedHosts: ["x"]) == ["y1"])
        #expect(drain(&queue) == ["x1", "x2"])
    }

    @Test("dead entries (cancelled, re-prioritised) are dropped and counted out")
    func deadEntries() {
        var queue = TransferQueue<Item>()
        let items = (1...3).map { Item("i\($0)") }
        for item in items { queue.enqueue(item, priority: .prefetch, submitter: SubmitterID(rawValue: 1)) }
        items[0].isLive = false
        items[2].isLive = false
        #expect(drain(&queue) == ["i2"])
        #expect(queue.entryCount == 0)
    }

    @Test("enqueueFirst puts a retry ahead of its list's later URLs")
    func retryFirst() {
        var queue = TransferQueue<Item>()
        let list = SubmitterID(rawValue: 1)
        queue.enqueue(Item("n1"), priority: .prefetch, submitter: list)
        queue.enqueueFirst(Item("retry"), priority: .prefetch, submitter: list)
        #expect(drain(&queue) == ["retry", "n1"])
    }
}

@Suite("Address and retry policy", .offThePool)
struct PolicyTests {
    @Test(
        "the default deny list covers link-local, metadata and 0.0.0.0/8, in IPv4 and mapped forms",
        arguments: ["169.254.169.254", "169.254.0.1", "::ffff:169.254.169.254", "fe80::1", "0.0.0.0", "fd00:ec2::254", "100.100.100.200"])
    func denied(address: String) throws {
        let parsed = try #require(IPRange.Address(address))
        #expect(AddressPolicy.default.denyingRange(for: parsed) != nil)
    }

    @Test(
        "loopback and private ranges are allowed by default",
        arguments: ["127.0.0.1", "::1", "10.1.2.3", "192.168.1.1", "172.16.0.1", "93.184.216.34", "2001:db8::1"])
    func allowed(address: String) throws {
        let parsed = try #require(IPRange.Address(address))
        #expect(AddressPolicy.default.denyingRange(for: parsed) == nil)
    }

    @Test("CIDR parsing rejects nonsense", arguments: ["", "1.2.3.4/33", "fe80::/129", "abc", "1.2.3.4/x", "1.2.3.4/8/9"])
    func badRanges(text: String) {
        #expect(IPRange(text) == nil)
    }

    @Test("back-off doubles, is jittered into its upper half, and respects Retry-After up to the clamp")
    func backoff() {
        var policy = RetryPolicy()
        policy.baseDelay = .milliseconds(100)
        policy.maxDelay = .seconds(1)
        policy.maxRetryAfter = .seconds(5)
        for _ in 0..<50 {
            let first = policy.delay(afterAttempt: 1, retryAfter: nil)
            #expect(first >= .milliseconds(50) && first <= .milliseconds(100))
            let third = policy.delay(afterAttempt: 3, retryAfter: nil)
            #expect(third >= .milliseconds(200) && third <= .milliseconds(400))
            let capped = policy.delay(afterAttempt: 20, retryAfter: nil)
            #expect(capped <= .seconds(1))
            #expect(policy.delay(afterAttempt: 1, retryAfter: .seconds(2)) == .seconds(2))
            #expect(policy.delay(afterAttempt: 1, retryAfter: .seconds(3600)) == .seconds(5))
        }
    }
}
