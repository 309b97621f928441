import Foundation
import ImgdCore
import ImgdStore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// Slow origins must not hold the downloader: tarpits (a large declared body, then a trickle),
/// lists that keep every slot, and an on-demand request arriving while prefetches fill the caps.
@Suite("Slow origins", .timeLimit(.minutes(5)), .offThePool)
struct SlowOriginTests {
    /// A PNG head, a 400 KB declared length, then 2 KiB/s: about 200 s for the body, longer
    /// than the whole attempt's 120 s. (Not larger: the test server makes each body anew, on the
    /// event loop that also serves the fast URLs.)
    static func tarpit(_ name: String, bytesPerSecond: Int = 2048) -> String {
        "/img/\(name).png?w=16&h=16&bytes=400000&slow_bps=\(bytesPerSecond)"
    }

    /// An attempt long enough for a tarpit to finish in, so that the pace rule lets it hold its
    /// slot (with 120 s it ends each as hopeless 3 s into its body, freeing the slot).
    static let holdingPolicy = DownloaderFixture.testPolicy { $0.totalTimeout = .seconds(600) }

    @Test("two tarpit hosts hold all 8 slots; an on-demand fetch of a fast URL is answered before any tarpit transfer ends")
    func onDemandPassesTarpits() async throws {
        let first = try await TestHTTPServer.start()
        let second = try await TestHTTPServer.start()
        try await withFixture(policy: Self.holdingPolicy) { fixture in
            #expect(fixture.downloader.policy.maxParallel == 8 && fixture.downloader.policy.maxPerHost == 4)
            let lists = try [first, second].map { server in
                try (0..<6).map { try ImageURL(server.url(Self.tarpit("tarpit-\($0)"))) }
            }
            let answers = DownloaderPrefetchTests.Answers()
            for urls in lists {
                fixture.downloader.prefetch(urls, submitter: fixture.downloader.makeSubmitter()) { answers.record($0, $1) }
            }
            #expect(await first.waitForInFlight(atLeast: 4, timeout: .seconds(20)))
            #expect(await second.waitForInFlight(atLeast: 4, timeout: .seconds(20)))
            #expect(fixture.downloader.statistics.running == 8)

            let image = try await fixture.downloader.fetch(fixture.url("/img/fast.png?w=8&h=8"))
            #expect(image.source == .network)
            // No tarpit had been answered at all (each body takes ~200 s), neither cached nor
            // failed (a paced-out tarpit would have freed a slot): the fetch did not wait for one.
            let statistics = fixture.downloader.statistics
            #expect(answers.all.isEmpty, "a tarpit transfer ended first: \(answers.all)")
            #expect(statistics.pacedOut == 0, "\(statistics)")
            // The prefetch that gave way was put back (no answer above), not failed.
            #expect(statistics.preempted >= 1, "\(statistics)")
        }
        try await first.shutdown()
        try await second.shutdown()
    }

    @Test("an on-demand fetch on the tarpit host itself takes a slot from that host's prefetches")
    func onDemandOnFullHost() async throws {
        var policy = Self.holdingPolicy
        policy.maxParallel = 8
        policy.maxPerHost = 2
        try await withFixture(policy: policy) { fixture in
            let urls = try (0..<4).map { try fixture.url(Self.tarpit("held-\($0)")) }
            fixture.downloader.prefetch(urls, submitter: fixture.downloader.makeSubmitter()) { _, _ in }
            #expect(await fixture.server.waitForInFlight(atLeast: 2, timeout: .seconds(20)))
            let image = try await fixture.downloader.fetch(fixture.url("/img/same-host.png?w=8&h=8"))
            #expect(image.source == .network)
            #expect(fixture.downloader.statistics.succeeded == 1, "a tarpit transfer ended before the on-demand fetch")
            #expect(fixture.server.maxInFlight <= 3, "the per-host cap still holds, give or take the closing prefetch")
            #expect(fixture.downloader.statistics.preempted == 1)
            #expect(fixture.downloader.statistics.failed == 0)
        }
    }

    @Test("an on-demand job held back by on-demand transfers on its host does not hold back one that a prefetch can make room for")
    func onDemandNotBlockedByOnDemand() async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.maxParallel = 2
            $0.maxPerHost = 1
        }
        let other = try await TestHTTPServer.start()
        let third = try await TestHTTPServer.start()
        try await withFixture(policy: policy) { fixture in
            // Host H: one on-demand transfer held; host G: one prefetch held. Every slot is taken.
            let heldOnDemand = Task { try await fixture.downloader.fetch(fixture.url("/img/od-1.png?gate=h")) }
            #expect(await fixture.server.waitForInFlight(atLeast: 1, timeout: .seconds(20)))
            fixture.downloader.prefetch(
                [try ImageURL(other.url("/img/pf.png?gate=g"))], submitter: fixture.downloader.makeSubmitter()
            ) { _, _ in }
            #expect(await other.waitForInFlight(atLeast: 1, timeout: .seconds(20)))
            // A second on-demand job on H can only wait (no prefetch on H to take a slot from)...
            let waitingOnDemand = Task { try await fixture.downloader.fetch(fixture.url("/img/od-2.png")) }
            #expect(await eventually(timeout: .seconds(10)) { fixture.downloader.statistics.queued == 1 })
            // ...and a third, on another host, takes the prefetch's slot at once.
            let image = try await fixture.downloader.fetch(ImageURL(third.url("/img/od-3.png")))
            #expect(image.source == .network)
            #expect(fixture.downloader.statistics.preempted == 1)
            fixture.server.openGate("h")
            other.openGate("g")
            _ = try await heldOnDemand.value
            _ = try await waitingOnDemand.value
        }
        try await other.shutdown()
        try await third.shutdown()
    }

    @Test("an on-demand URL the address policy refuses takes no prefetch's slot")
    func refusedOnDemandPreemptsNothing() async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.maxParallel = 1
            $0.addresses = AddressPolicy(deniedRanges: AddressPolicy.default.deniedRanges + [IPRange("127.0.0.2/32")!])
        }
        try await withFixture(policy: policy) { fixture in
            fixture.downloader.prefetch([try fixture.url("/img/kept.png?gate=kept")], submitter: fixture.downloader.makeSubmitter()) { _, _ in }
            #expect(await fixture.server.waitForInFlight(atLeast: 1, timeout: .seconds(20)))
            let error = await fixture.failure(url: try ImageURL("http://127.0.0.2:\(fixture.server.port)/img/denied.png"))
            #expect(error?.code == "policy_denied")
            #expect(fixture.downloader.statistics.preempted == 0)
            #expect(fixture.server.requestCount("/img/kept.png?gate=kept") == 1)
            fixture.server.openGate("kept")
        }
    }

    @Test("a list's URL the address policy refuses is answered at once, without taking a slot from the list that holds them all")
    func refusedPrefetchPreemptsNothing() async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.maxParallel = 2
            $0.maxPerHost = 2
            $0.fairShareGrace = .milliseconds(300)
            $0.addresses = AddressPolicy(deniedRanges: AddressPolicy.default.deniedRanges + [IPRange("127.0.0.2/32")!])
        }
        try await withFixture(policy: policy) { fixture in
            let paths = (0..<2).map { "/img/held-\($0).png?gate=held" }
            let holder = try paths.map { try fixture.url($0) }
            let held = DownloaderPrefetchTests.Answers()
            fixture.downloader.prefetch(holder, submitter: fixture.downloader.makeSubmitter()) { held.record($0, $1) }
            #expect(await fixture.server.waitForInFlight(atLeast: 2, timeout: .seconds(20)))

            let denied = DownloaderPrefetchTests.Answers()
            fixture.downloader.prefetch(
                [try ImageURL("http://127.0.0.2:\(fixture.server.port)/img/denied.png")],
                submitter: fixture.downloader.makeSubmitter()) { denied.record($0, $1) }
            // Answered while the first list's gate is still shut: the fair share started it.
            #expect(await eventually(timeout: .seconds(20)) { denied.count == 1 })
            #expect(denied.all.first.map { $0.1.failureCode } == "policy_denied")
            #expect(fixture.downloader.statistics.preempted == 0, "\(fixture.downloader.statistics)")
            #expect(held.count == 0)
            for path in paths { #expect(fixture.server.requestCount(path) == 1) }

            // The holder's transfers were never stopped: they finish, once each.
            fixture.server.openGate("held")
            #expect(await eventually(timeout: .seconds(20)) { held.count == 2 })
            #expect(held.all.allSatisfy { (try? $0.1.get()) != nil })
        }
    }

    @Test("a transfer whose pace cannot finish its declared body in time ends early as timeout")
    func hopelessPaceEndsEarly() async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.retry.maxAttempts = 1
            $0.totalTimeout = .seconds(60)
        }
        try await withFixture(policy: policy) { fixture in
            // 400 KB at 4 KiB/s: about 100 s, where the attempt allows 60. Ended by the pace rule
            // (its message, its counter), not by the 60 s limit: that is the proof of "early".
            let error = try await fixture.failure(Self.tarpit("hopeless", bytesPerSecond: 4096))
            guard case .timeout(let message) = error else {
                Issue.record("expected a timeout, got \(String(describing: error))")
                return
            }
            #expect(message.contains("bytes/s"), "\(message)")
            #expect(fixture.downloader.statistics.pacedOut == 1)
            #expect(fixture.tempFiles.isEmpty)
            // The slot is free and nothing leaked: the next URL arrives.
            let next = try await fixture.downloader.fetch(fixture.url("/img/after-tarpit.png"))
            #expect(next.source == .network)
        }
    }

    @Test("a slow body that can finish in time is left to finish")
    func slowButFeasible() async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.retry.maxAttempts = 1
            $0.totalTimeout = .seconds(60)
        }
        try await withFixture(policy: policy) { fixture in
            // 120 KB at 30 KB/s: about 4 s, past the 3 s the pace is watched for.
            let target = "/img/slow-ok.png?w=16&h=16&bytes=120000&slow_bps=30000"
            let image = try await fixture.downloader.fetch(fixture.url(target))
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: image.path))) == TestHTTPServer.body(for: target))
            #expect(fixture.downloader.statistics.pacedOut == 0)
        }
    }

    @Test("a list holding every slot gives one up to a waiting list after the grace; nothing fails")
    func fairShare() async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.maxParallel = 4
            $0.maxPerHost = 4
            $0.fairShareGrace = .milliseconds(300)
        }
        let other = try await TestHTTPServer.start()
        try await withFixture(policy: policy) { fixture in
            let holder = try (0..<6).map { try fixture.url("/img/hold-\($0).png?gate=hold") }
            let held = DownloaderPrefetchTests.Answers()
            fixture.downloader.prefetch(holder, submitter: fixture.downloader.makeSubmitter()) { held.record($0, $1) }
            #expect(await fixture.server.waitForInFlight(atLeast: 4, timeout: .seconds(20)))

            let waiting = try (0..<2).map { try ImageURL(other.url("/img/waiting-\($0).png")) }
            let served = DownloaderPrefetchTests.Answers()
            fixture.downloader.prefetch(waiting, submitter: fixture.downloader.makeSubmitter()) { served.record($0, $1) }
            // Both arrive while the first list's gate is still shut.
            #expect(await eventually(timeout: .seconds(20)) { served.count == 2 })
            #expect(served.all.allSatisfy { (try? $0.1.get()) != nil })
            #expect(held.count == 0)
            #expect(fixture.downloader.statistics.preempted >= 1)

            fixture.server.openGate("hold")
            #expect(await eventually(timeout: .seconds(20)) { held.count == 6 })
            #expect(held.all.allSatisfy { (try? $0.1.get()) != nil }, "a preempted prefetch is put back, never failed")
            #expect(fixture.downloader.statistics.failed == 0)
        }
        try await other.shutdown()
    }
}

extension Result where Failure == DownloadError {
    /// The failure's code, or nil on success.
    var failureCode: String? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
