import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

@Suite("Coalescing, caps, priorities, cancellation", .timeLimit(.minutes(5)), .offThePool)
struct DownloaderSchedulingTests {
    @Test("100 concurrent requests for one URL make exactly one request; every waiter gets the image")
    func coalescing() async throws {
        try await withFixture { fixture in
            let target = "/img/shared.png?w=20&h=20&gate=shared"
            let url = try fixture.url(target)
            let paths = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<100 {
                    group.addTask { try await fixture.downloader.fetch(url).path }
                }
                #expect(await fixture.server.waitForRequests(atLeast: 1, timeout: .seconds(5)))
                #expect(await eventually { fixture.downloader.statistics.coalesced == 99 })
                fixture.server.openGate("shared")
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(paths.count == 100)
            #expect(Set(paths) == [fixture.cache.path(for: url.cacheKey)])
            #expect(fixture.server.requestCount(target) == 1)
        }
    }

    @Test("a failed job leaves the coalescing table: after the failure memory, the URL is fetched anew")
    func failedJobIsRemoved() async throws {
        try await withFixture(policy: DownloaderFixture.testPolicy { $0.retry.maxAttempts = 1 }) { fixture in
            let url = try fixture.url("/status/404")
            _ = await fixture.failure(url: url)
            _ = await fixture.failure(url: url)
            #expect(fixture.server.requestCount("/status/404") == 1, "the second answer comes from the failure memory")
            fixture.downloader.forgetFailures(of: url)
            let again = await fixture.failure(url: url)
            #expect(again == .http(status: 404, retryAfter: nil))
            #expect(fixture.server.requestCount("/status/404") == 2)
        }
    }

    @Test("the global cap is never exceeded: three hosts together never hold more requests at once")
    func globalCap() async throws {
        // The per-host cap equals the global one, so only the global cap keeps three hosts
        // from holding nine requests at once; the servers count what is in flight themselves.
        let policy = DownloaderFixture.testPolicy {
            $0.maxParallel = 3
            $0.maxPerHost = 3
        }
        let gauge = InFlightGauge()
        let server = try await TestHTTPServer.start(gauge: gauge)
        let others = [try await TestHTTPServer.start(gauge: gauge), try await TestHTTPServer.start(gauge: gauge)]
        let fixture = try await DownloaderFixture(policy: policy, server: server)
        do {
            let servers = [server] + others
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<30 {
                    let url = try ImageURL(servers[index % 3].url("/img/g\(index).png?delay_ms=30"))
                    group.addTask { _ = try await fixture.downloader.fetch(url, priority: .prefetch) }
                }
                try await group.waitForAll()
            }
            #expect(gauge.peak == 3, "at most 3 at once over all hosts, and the cap was reached")
            #expect(servers.map(\.totalRequests) == [10, 10, 10])
            for each in servers { #expect(each.maxInFlight <= 3) }
            #expect(gauge.current == 0)
        } catch {
            Issue.record(error)
        }
        for each in others { try await each.shutdown() }
        try await fixture.close()
    }

    @Test("the per-host cap holds for each host while the global cap allows more")
    func perHostCap() async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.maxParallel = 8
            $0.maxPerHost = 2
        }
        try await withFixture(policy: policy) { fixture in
            let other = try await TestHTTPServer.start()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<20 {
                    let first = try fixture.url("/img/h\(index).png?delay_ms=30")
                    let second = try ImageURL(other.url("/img/h\(index).png?delay_ms=30"))
                    group.addTask { _ = try await fixture.downloader.fetch(first, priority: .prefetch) }
                    group.addTask { _ = try await fixture.downloader.fetch(second, priority: .prefetch) }
                }
                try await group.waitForAll()
            }
            #expect(fixture.server.maxInFlight == 2)
            #expect(other.maxInFlight == 2)
            try await other.shutdown()
        }
    }

    @Test("an on-demand request jumps ahead of queued prefetches and takes the running prefetch's slot")
    func priority() async throws {
        let policy = DownloaderFixture.testPolicy { $0.maxParallel = 1 }
        try await withFixture(policy: policy) { fixture in
            try await withThrowingTaskGroup(of: Void.self) { group in
                let blocker = try fixture.url("/img/blocker.png?gate=go")
                group.addTask { _ = try await fixture.downloader.fetch(blocker, priority: .prefetch) }
                #expect(await fixture.server.waitForInFlight(atLeast: 1, timeout: .seconds(5)))
                for index in 0..<5 {
                    let url = try fixture.url("/img/p\(index).png")
                    group.addTask { _ = try await fixture.downloader.fetch(url, priority: .prefetch) }
                }
                #expect(await eventually { fixture.downloader.statistics.queued == 5 })
                let urgent = try fixture.url("/img/urgent.png")
                group.addTask { _ = try await fixture.downloader.fetch(urgent, priority: .onDemand) }
                // It does not wait for the slot: the held prefetch gives way and goes back to the
                // front of the queue, and the urgent image arrives while the gate is still shut.
                #expect(await eventually { fixture.server.requestCount("/img/urgent.png") == 1 })
                #expect(await eventually { fixture.downloader.statistics.succeeded == 1 })
                #expect(fixture.downloader.statistics.preempted == 1)
                // The slot is free again: the prefetch that gave way goes first, before the other five.
                #expect(await eventually { fixture.server.requestCount("/img/blocker.png?gate=go") == 2 })
                #expect(fixture.downloader.statistics.queued == 5)
                fixture.server.openGate("go")
                try await group.waitForAll()
            }
            #expect(fixture.server.requestLog.count == 8, "the preempted blocker is asked again")
            #expect(fixture.server.requestLog[1] == "/img/urgent.png")
            #expect(fixture.server.requestLog[2] == "/img/blocker.png?gate=go", "put back at the front, not failed")
            #expect(fixture.downloader.statistics.failed == 0)
        }
    }

    @Test("a long list does not starve a short one submitted after it")
    func fairness() async throws {
        let policy = DownloaderFixture.testPolicy { $0.maxParallel = 1 }
        try await withFixture(policy: policy) { fixture in
            let long = fixture.downloader.makeSubmitter()
            let short = fixture.downloader.makeSubmitter()
            try await withThrowingTaskGroup(of: Void.self) { group in
                let blocker = try fixture.url("/img/first.png?gate=go")
                group.addTask { _ = try await fixture.downloader.fetch(blocker, priority: .prefetch, submitter: long) }
                #expect(await fixture.server.waitForInFlight(atLeast: 1, timeout: .seconds(5)))
                for index in 0..<50 {
                    let url = try fixture.url("/img/long\(index).png")
                    group.addTask { _ = try await fixture.downloader.fetch(url, priority: .prefetch, submitter: long) }
                }
                #expect(await eventually { fixture.downloader.statistics.queued == 50 })
                for index in 0..<3 {
                    let url = try fixture.url("/img/short\(index).png")
                    group.addTask { _ = try await fixture.downloader.fetch(url, priority: .prefetch, submitter: short) }
                }
                #expect(await eventually { fixture.downloader.statistics.queued == 53 })
                fixture.server.openGate("go")
                try await group.waitForAll()
            }
            let log = fixture.server.requestLog
            let lastShort = try #require(log.lastIndex { $0.hasPrefix("/img/short") })
            // Turns alternate, so the short list is done within its first few turns.
            #expect(lastShort <= 7, "short list finished at position \(lastShort) of \(log.count)")
        }
    }

    @Test("cancelling a transfer whose body outgrew memory removes its temp file before answering")
    func cancelSpilled() async throws {
        try await withFixture { fixture in
            // Stalls after 200 KB: past the in-memory buffer, so part of it is in tmp/.
            let url = try fixture.url("/img/stuck.png?w=400&h=400&stall_after=200000")
            let task = Task { try await fixture.downloader.fetch(url) }
            #expect(await eventually { fixture.tempFiles.count == 1 }, "the body reached its temp file")
            task.cancel()
            let result = await task.result
            #expect(throws: DownloadError.cancelled) { try result.get() }
            #expect(fixture.tempFiles.isEmpty)
        }
    }

    @Test("cancelling a running transfer stops it and answers cancelled")
    func cancelRunning() async throws {
        try await withFixture { fixture in
            let url = try fixture.url("/img/slow.png?gate=never")
            let task = Task { try await fixture.downloader.fetch(url) }
            #expect(await fixture.server.waitForInFlight(atLeast: 1, timeout: .seconds(5)))
            task.cancel()
            let result = await task.result
            #expect(throws: DownloadError.cancelled) { try result.get() }
            #expect(await eventually { fixture.server.inFlight == 0 }, "the connection was closed")
            #expect(fixture.tempFiles.isEmpty)
            // A cancelled URL is not remembered as failed: it can be fetched right away.
            #expect(fixture.downloader.statistics.failed == 0)
        }
    }

    @Test("cancelling a queued request withdraws it before any request is made")
    func cancelQueued() async throws {
        let policy = DownloaderFixture.testPolicy { $0.maxParallel = 1 }
        try await withFixture(policy: policy) { fixture in
            let blocker = try fixture.url("/img/blocker.png?gate=go")
            let first = Task { try await fixture.downloader.fetch(blocker) }
            #expect(await fixture.server.waitForInFlight(atLeast: 1, timeout: .seconds(5)))
            let queuedURL = try fixture.url("/img/queued.png")
            let queued = Task { try await fixture.downloader.fetch(queuedURL) }
            #expect(await eventually { fixture.downloader.statistics.queued == 1 })
            queued.cancel()
            await #expect(throws: DownloadError.cancelled) { try await queued.value }
            fixture.server.openGate("go")
            _ = try await first.value
            #expect(fixture.server.requestCount("/img/queued.png") == 0)
        }
    }

    @Test("one waiter leaving does not cancel the transfer others still wait for")
    func partialCancel() async throws {
        try await withFixture { fixture in
            let url = try fixture.url("/img/both.png?gate=go")
            let leaving = Task { try await fixture.downloader.fetch(url) }
            let staying = Task { try await fixture.downloader.fetch(url) }
            #expect(await eventually { fixture.downloader.statistics.coalesced == 1 })
            leaving.cancel()
            await #expect(throws: DownloadError.cancelled) { try await leaving.value }
            fixture.server.openGate("go")
            #expect(try await staying.value.source == .network)
            #expect(fixture.server.requestCount("/img/both.png?gate=go") == 1)
        }
    }

    @Test("cancel(url:) answers every waiter of that URL")
    func cancelByURL() async throws {
        try await withFixture { fixture in
            let url = try fixture.url("/img/c.png?gate=never")
            let waiters = (0..<3).map { _ in Task { try await fixture.downloader.fetch(url) } }
            #expect(await eventually { fixture.downloader.statistics.coalesced == 2 })
            fixture.downloader.cancel(url: url)
            for waiter in waiters {
                await #expect(throws: DownloadError.cancelled) { try await waiter.value }
            }
        }
    }

    @Test("shutdown answers every waiter and releases libcurl")
    func shutdown() async throws {
        let fixture = try await DownloaderFixture()
        let url = try fixture.url("/img/s.png?gate=never")
        let waiter = Task { try await fixture.downloader.fetch(url) }
        #expect(await fixture.server.waitForInFlight(atLeast: 1, timeout: .seconds(5)))
        await fixture.downloader.shutdown()
        await #expect(throws: DownloadError.cancelled) { try await waiter.value }
        // After shutdown, new requests are answered at once.
        await #expect(throws: DownloadError.cancelled) { try await fixture.downloader.fetch(fixture.url("/img/later.png")) }
        try await fixture.close()
    }
}

@Suite("Retries", .timeLimit(.minutes(5)), .offThePool)
struct DownloaderRetryTests {
    @Test("a transient 503 is retried until it succeeds")
    func retriesTransient() async throws {
        try await withFixture { fixture in
            let image = try await fixture.downloader.fetch(fixture.url("/flaky/r.png?fail=2&status=503"))
            #expect(image.download?.attempts == 3)
            #expect(fixture.server.requestCount("/flaky/r.png?fail=2&status=503") == 3)
        }
    }

    @Test("retries stop after the attempt limit, with the last error")
    func attemptLimit() async throws {
        try await withFixture { fixture in
            let error = try await fixture.failure("/flaky/r.png?fail=9&status=500")
            #expect(error == .http(status: 500, retryAfter: nil))
            #expect(fixture.server.requestCount("/flaky/r.png?fail=9&status=500") == 3)
        }
    }

    @Test("a truncated body is retried")
    func truncatedIsRetried() async throws {
        try await withFixture { fixture in
            let error = try await fixture.failure("/img/t.png?w=64&h=64&close_after=100")
            #expect(error?.code == "truncated")
            #expect(fixture.server.requestCount("/img/t.png?w=64&h=64&close_after=100") == 3)
        }
    }

    @Test("404, 410, not_image and policy_denied are never retried", arguments: ["/status/404", "/status/410", "/html"])
    func finalFailures(target: String) async throws {
        try await withFixture { fixture in
            _ = try await fixture.failure(target)
            #expect(fixture.server.requestCount(target) == 1)
        }
    }

    @Test("hosts are forgotten once idle: after fetching from three hosts, the engine keeps state for none of them")
    func idleHostsForgotten() async throws {
        try await withFixture { fixture in
            var others: [TestHTTPServer] = []
            for _ in 0..<2 { others.append(try await TestHTTPServer.start()) }
            _ = try await fixture.downloader.fetch(fixture.url("/img/here.png"))
            for (index, other) in others.enumerated() {
                _ = try await fixture.downloader.fetch(ImageURL(other.url("/img/there-\(index).png")))
            }
            #expect(await eventually { fixture.downloader.statistics.succeeded == 3 })
            #expect(fixture.downloader.statistics.hosts == 0, "hosts kept: \(fixture.downloader.statistics.hosts)")
            for other in others { try await other.shutdown() }
        }
    }

    @Test("429 with Retry-After holds the host until then: another URL on it waits, another host does not")
    func retryAfter() async throws {
        // One log of arrivals over both hosts: the order is what the servers saw.
        let order = RequestOrder()
        let held = try await TestHTTPServer.start(order: order)
        try await withFixture(server: held) { fixture in
            let other = try await TestHTTPServer.start(order: order)
            let target = "/flaky/ra.png?fail=1&status=429&retry_after=5"
            let sameHost = "/img/same-host.png"
            try await withThrowingTaskGroup(of: Void.self) { group in
                let started = ContinuousClock.now
                let flaky = try fixture.url(target)
                group.addTask {
                    let image = try await fixture.downloader.fetch(flaky)
                    #expect(image.download?.attempts == 2)
                }
                // The 429 has been answered once the downloader schedules its retry.
                #expect(await eventually { fixture.downloader.statistics.retries == 1 })
                let neighbour = try fixture.url(sameHost)
                group.addTask {
                    _ = try await fixture.downloader.fetch(neighbour)
                    #expect(ContinuousClock.now - started >= .seconds(5), "the same host's other URL waited for Retry-After")
                }
                // Another host is not held: its image is fetched while the held host waits.
                let elsewhere = try await fixture.downloader.fetch(ImageURL(other.url("/img/elsewhere.png")))
                #expect(elsewhere.source == .network)
                try await group.waitForAll()
            }
            // The 429, then the other host's request, and only then the held host's two: the
            // retry and the other URL (in either order, both released by the end of the hold).
            let arrivals = order.all
            #expect(arrivals.count == 4, "\(arrivals)")
            #expect(arrivals.first == target && arrivals.dropFirst().first == "/img/elsewhere.png", "\(arrivals)")
            #expect(arrivals.dropFirst(2).sorted() == [target, sameHost].sorted(), "\(arrivals)")
            // After the hold, both were fetched: the retry and the other URL, each once.
            #expect(fixture.server.requestCount(target) == 2)
            #expect(fixture.server.requestCount(sameHost) == 1)
            #expect(other.requestCount("/img/elsewhere.png") == 1)
            try await other.shutdown()
        }
    }

    @Test("Retry-After is clamped to the configured maximum")
    func retryAfterClamp() async throws {
        let policy = DownloaderFixture.testPolicy { $0.retry.maxRetryAfter = .milliseconds(100) }
        try await withFixture(policy: policy) { fixture in
            let target = "/flaky/rb.png?fail=1&status=503&retry_after=3600"
            let started = ContinuousClock.now
            _ = try await fixture.downloader.fetch(fixture.url(target))
            #expect(ContinuousClock.now - started < .seconds(30))
        }
    }
}
