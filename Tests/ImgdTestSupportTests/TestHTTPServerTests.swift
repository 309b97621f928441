import Foundation
import ImgdTestSupport
import Testing

/// The scripted test server, checked through the real `curl` binary: the same libcurl behaviours
/// the downloader will meet (exit 18 for a short body, 47 for a redirect loop).
@Suite(.timeLimit(.minutes(5)), .offThePool) struct TestHTTPServerTests {
    @Test func imageRoutesServeExactlyTheirBodies() async throws {
        try await withServer { server in
            let targets = [
                "/img/a.png?w=16&h=12", "/img/b.png?w=16&h=12", "/img/c.png?bytes=5000&seed=3",
                "/img/d.gif?w=3&h=2", "/img/e.jpg?w=5&h=4&bytes=300", "/html", "/huge.png",
            ]
            let result = try await curl(targets.map(server.url))
            #expect(result.exitCode == 0)
            #expect(result.statuses == Array(repeating: 200, count: targets.count))
            for (target, body) in zip(targets, result.bodies) {
                let expected = try #require(TestHTTPServer.body(for: target))
                #expect(body == expected, "\(target)")
            }
            #expect(result.bodies[0] != result.bodies[1], "different names seed different pixels")
            #expect(result.bodies[2].count == 5000)
            #expect(
                result.header("Content-Type")
                    == ["image/png", "image/png", "image/png", "image/gif", "image/jpeg", "text/html", "image/png"])
        }
    }

    @Test("as a proxy: absolute-form targets are routed by path and query, logged as received")
    func playsTheProxy() async throws {
        try await withServer { server in
            let targets = ["/img/p.png?w=9&h=7", "/status/404"]
            let urls = ["http://imgd-origin.invalid" + targets[0], "http://example.invalid:8080" + targets[1]]
            let result = try await curl(urls, options: ["--proxy", server.origin])
            #expect(result.statuses == [200, 404])
            #expect(result.bodies[0] == TestHTTPServer.body(for: targets[0]))
            #expect(server.requestLog == urls)
        }
    }

    @Test func bodiesAreDeterministicAndIndependentOfModifiers() {
        #expect(TestHTTPServer.body(for: "/img/x.png?w=9") == TestHTTPServer.body(for: "/img/x.png?w=9"))
        let plain = TestHTTPServer.body(for: "/img/x.png?w=9")
        #expect(TestHTTPServer.body(for: "/img/x.png?w=9&delay_ms=5&chunked=1") == plain)
        #expect(TestHTTPServer.body(for: "/flaky/x.png?w=9&fail=3") == plain)
        #expect(TestHTTPServer.body(for: "/img/x.png?w=abc") == nil)
        #expect(TestHTTPServer.body(for: "/img/x.png?w=100000") == nil, "over the side limit")
        #expect(TestHTTPServer.body(for: "/img/x.png?no_cl=1&chunked=1") == nil, "contradictory framing")
        #expect(TestHTTPServer.body(for: "/nowhere") == nil)
    }

    @Test func flakyFailsThenServesTheImage() async throws {
        try await withServer { server in
            let target = "/flaky/f.png?fail=2&status=503&retry_after=7"
            let result = try await curl(Array(repeating: server.url(target), count: 3))
            #expect(result.exitCode == 0)
            #expect(result.statuses == [503, 503, 200])
            #expect(result.header("Retry-After") == ["7", "7"])
            #expect(result.bodies[2] == TestHTTPServer.body(for: target))
            #expect(server.requestCount(target) == 3)

            let other = "/flaky/g.png?fail=1&status=429"
            let second = try await curl([server.url(other), server.url(other)])
            #expect(second.statuses == [429, 200])
            #expect(second.header("Retry-After").isEmpty)
        }
    }

    @Test func statusesRedirectsAndLoops() async throws {
        try await withServer { server in
            let targets = ["/status/404", "/status/500", "/nowhere", "/img/x.png?w=abc"]
            let statuses = try await curl(targets.map(server.url))
            #expect(statuses.statuses == [404, 500, 404, 400])

            let head = try await curl(
                [server.url("/img/h.png?bytes=3000"), server.url("/status/204")], options: ["--head"])
            #expect(head.exitCode == 0)
            #expect(head.statuses == [200, 204])
            #expect(head.header("Content-Length") == ["3000"])

            let destination = try #require(
                server.url("/img/r.png?w=4").addingPercentEncoding(withAllowedCharacters: .alphanumerics))
            let redirect = try await curl([server.url("/redirect?to=\(destination)")], options: ["--location"])
            #expect(redirect.exitCode == 0)
            #expect(redirect.statuses == [302, 200])
            #expect(redirect.bodies[0] == TestHTTPServer.body(for: "/img/r.png?w=4"))

            let loop = try await curl([server.url("/loop/0")], options: ["--location", "--max-redirs", "3"])
            #expect(loop.exitCode == 47)
            #expect(server.requestLog.suffix(4) == ["/loop/0", "/loop/1", "/loop/2", "/loop/3"])
        }
    }

    @Test func framingVariantsDeliverTheBody() async throws {
        try await withServer { server in
            let chunked = "/img/k.png?bytes=10000&chunked=1"
            let unframed = "/img/k.png?bytes=10000&no_cl=1"
            let slow = "/img/k.png?bytes=2000&slow_bps=10000&chunked=1"
            let start = ContinuousClock.now
            let result = try await curl([chunked, unframed, slow].map(server.url))
            let elapsed = ContinuousClock.now - start
            #expect(result.exitCode == 0)
            for (target, body) in zip([chunked, unframed, slow], result.bodies) {
                #expect(body == TestHTTPServer.body(for: target), "\(target)")
            }
            #expect(result.header("Transfer-Encoding") == ["chunked", "chunked"])
            #expect(result.header("Content-Length").isEmpty)
            // 2000 bytes at 10000 B/s go in four pieces 50 ms apart.
            #expect(elapsed >= .milliseconds(140))
            #expect(server.connectionsAccepted == 2, "no_cl closes the connection after its body")

            let short = try await curl([server.url("/img/k.png?bytes=1000&cl=-10")])
            #expect(short.header("Content-Length") == ["990"])
            let whole = try #require(TestHTTPServer.body(for: "/img/k.png?bytes=1000"))
            #expect(short.bodies[0] == Array(whole.prefix(990)))
        }
    }

    @Test func gatedRequestIsHeldUntilTheGateOpens() async throws {
        try await withServer { server in
            let target = "/img/g.png?gate=g1&delay_ms=20"
            let run = try startCurl([server.url(target)])
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(5)))
            #expect(server.inFlight == 1)
            #expect(server.requestLog == [target])
            server.openGate("g1")
            let result = try await run.value
            #expect(result.exitCode == 0)
            #expect(result.bodies[0] == TestHTTPServer.body(for: target))
            #expect(await eventually(timeout: .seconds(5)) { server.inFlight == 0 })
            #expect(server.maxInFlight == 1)

            // An open gate stays open for later requests.
            let later = try await curl([server.url("/img/h.png?gate=g1")])
            #expect(later.exitCode == 0)
        }
    }

    @Test func truncatedAndStalledBodies() async throws {
        try await withServer { server in
            let closed = try await curl([server.url("/img/t.png?bytes=1000&close_after=10")])
            #expect(closed.exitCode == 18)
            #expect(closed.bodies[0].count == 10)
            let overstated = try await curl([server.url("/img/t.png?bytes=1000&cl=+10")])
            #expect(overstated.exitCode == 18)
            #expect(overstated.header("Content-Length") == ["1010"])
            #expect(await eventually(timeout: .seconds(5)) { server.inFlight == 0 })

            // A stalled response stays in flight until the client gives up and closes.
            let stalled = try await curl(
                [server.url("/img/t.png?bytes=1000&stall_after=10")], options: ["--max-time", "0.3"])
            #expect(stalled.exitCode == 28)
            #expect(stalled.bodies[0].count == 10)
            #expect(await eventually(timeout: .seconds(5)) { server.inFlight == 0 })
        }
    }

    @Test func maxInFlightCountsParallelHeldRequests() async throws {
        try await withServer { server in
            let runs = try (0..<5).map { try startCurl([server.url("/img/p\($0).png?gate=p")]) }
            #expect(await server.waitForInFlight(atLeast: 5, timeout: .seconds(5)))
            #expect(server.maxInFlight == 5)
            #expect(server.connectionsAccepted == 5)
            server.openGate("p")
            for run in runs {
                #expect(try await run.value.exitCode == 0)
            }
            #expect(await eventually(timeout: .seconds(5)) { server.inFlight == 0 })
            #expect(server.maxInFlight == 5)
            server.resetCounters()
            #expect(server.maxInFlight == 0)
            #expect(server.totalRequests == 0)
        }
    }

    @Test func keepAliveReusesOneConnection() async throws {
        try await withServer { server in
            let first = "/img/k1.png", second = "/img/k2.png?w=3"
            let result = try await curl([server.url(first), server.url(second)])
            #expect(result.exitCode == 0)
            #expect(server.connectionsAccepted == 1)
            #expect(server.totalRequests == 2)
            #expect(server.requestLog == [first, second])
            #expect(server.requestCount(first) == 1)
            #expect(server.requestCount(prefix: "/img/k") == 2)
            #expect(result.bodies[1] == TestHTTPServer.body(for: second))
        }
    }

    @Test func shutdownClosesAStalledConnection() async throws {
        let server = try await TestHTTPServer.start()
        let run = try startCurl([server.url("/img/s.png?bytes=1000&stall_after=5")])
        #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(5)))
        // A hang here is caught by the suite's time limit, not a duration check.
        try await server.shutdown()
        let result = try await run.value
        #expect(result.exitCode == 18, "the close cut the body short")
        #expect(result.bodies[0].count == 5)
        try await server.shutdown()  // a second call does nothing
    }
}

// MARK: - Helpers

/// Runs `body` with a fresh server, shutting it down whether or not `body` throws.
private func withServer(_ body: (TestHTTPServer) async throws -> Void) async throws {
    let server = try await TestHTTPServer.start()
    do {
        try await body(server)
    } catch {
        try await server.shutdown()
        throw error
    }
    try await server.shutdown()
}

/// What one curl invocation did: its exit code, the response heads it printed, and each URL's body.
private struct CurlResult: Sendable {
    var exitCode: Int32
    var heads: String
    var bodies: [[UInt8]]

    /// The status of every response head, redirects and failures included, in order.
    var statuses: [Int] {
        heads.split(separator: "\r\n").filter { $0.hasPrefix("HTTP/") }.compactMap { line in
            line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        }
    }

    /// Every value of header `name` across all heads, in order.
    func header(_ name: String) -> [String] {
        heads.split(separator: "\r\n").compactMap { line in
            guard let colon = line.firstIndex(of: ":"),
                line[..<colon].lowercased() == name.lowercased()
            else { return nil }
            return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
    }
}

private func curl(_ urls: [String], options: [String] = []) async throws -> CurlResult {
    try await startCurl(urls, options: options).value
}

/// Starts `/usr/bin/curl` on `urls` (one invocation, so it may reuse connections) and returns a task
/// that finishes when curl exits. Heads go to stdout (small, read after exit); bodies go to files,
/// so a large body cannot fill the pipe.
private func startCurl(_ urls: [String], options: [String] = []) throws -> Task<CurlResult, any Error> {
    let directory = URL(fileURLWithPath: try ScratchFolder("imgd-curl").path)
    let files = urls.indices.map { directory.appendingPathComponent("body-\($0)") }
    var arguments = ["--silent", "--max-time", "10", "--dump-header", "-"] + options
    for (url, file) in zip(urls, files) { arguments += ["--output", file.path, url] }

    let curl = try ChildProcess("/usr/bin/curl", arguments, stdout: .pipe)
    return Task {
        let output = await curl.output()
        let bodies = files.map { file in (try? Data(contentsOf: file)).map { [UInt8]($0) } ?? [] }
        try? FileManager.default.removeItem(at: directory)
        return CurlResult(exitCode: output.status, heads: output.stdout, bodies: bodies)
    }
}
