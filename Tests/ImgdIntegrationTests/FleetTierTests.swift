import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The shared tier (docs/operations.md, *Fleet*; `contrib/fleet/`): the real `imgd` daemons fetching through
/// the real nginx tier rendered by `tier-smoke.sh --render`, from the test server over https
/// (the tier verifies it with the test CA). Keys, reports and the cache keep the origin URL;
/// the origin sees each URL once for the whole fleet; a tier that fails is stepped around.
@Suite(
    "A shared tier for fleets (the real imgd and nginx)", .serialized, .timeLimit(.minutes(10)),
    .enabled(if: NginxTier.unavailableReason == nil, "needs nginx (/usr/sbin/nginx, installed by make test)"), .offThePool)
struct FleetTierTests {
    /// A test's world: the origin (https, the test CA), the tier trusting that CA, a scratch folder.
    struct World {
        let certificates: TestCertificates
        let origin: TestHTTPServer
        let tier: NginxTier
        let scratch: ScratchFolder

        static func make(tierHTTP: String? = nil) async throws -> World {
            let certificates = try await TestCertificates.shared()
            let scratch = try ScratchFolder()
            let origin = try await TestHTTPServer.start(tls: try await ipCertificate(signedBy: "ca", certificates, in: scratch))
            let tier = try await NginxTier.start(caFile: certificates.caFile, http: tierHTTP)
            return World(certificates: certificates, origin: origin, tier: tier, scratch: scratch)
        }

        /// A certificate for 127.0.0.1 whose only names are that address (subject and IP SAN),
        /// signed by the test CA `ca` (`ca` or `rogue-ca`). nginx 1.22 checks an origin's
        /// address as a host name: it matches the subject only when there is no DNS name, and
        /// the shared test certificates also name `localhost`.
        static func ipCertificate(signedBy ca: String, _ certificates: TestCertificates, in scratch: ScratchFolder) async throws -> TestHTTPServer.TLS {
            let name = "origin-\(ca)"
            let folder = scratch.path
            try "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                .write(toFile: "\(folder)/\(name).ext", atomically: true, encoding: .utf8)
            for step in [
                ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "\(name).key",
                 "-out", "\(name).csr", "-subj", "/CN=127.0.0.1"],
                ["x509", "-req", "-in", "\(name).csr", "-CA", "\(certificates.folder)/\(ca).pem", "-CAkey",
                 "\(certificates.folder)/\(ca).key", "-set_serial", "\(UInt32.random(in: 1...UInt32.max))", "-out", "\(name).pem",
                 "-days", "2", "-extfile", "\(name).ext"],
            ] {
                let output = try await ChildProcess.run("/usr/bin/openssl", step, in: folder)
                guard output.status == 0 else { throw DaemonError(message: "openssl \(step[0]) failed: \(output.stderr)") }
            }
            return TestHTTPServer.TLS(certificate: "\(folder)/\(name).pem", key: "\(folder)/\(name).key")
        }

        /// A daemon in `scratch/name`, fetching through the tier, trusting the test CA.
        func daemon(_ name: String, caFile: String? = nil, _ more: [String] = []) async throws -> DaemonProcess {
            let folder = scratch.path + "/" + name
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            return try await DaemonProcess.start(
                in: folder, arguments: ["--ca-file", caFile ?? certificates.caFile, "--tier", tier.url] + more)
        }

        func close() async {
            await tier.remove()
            try? await origin.shutdown()
            scratch.remove()
        }
    }

    /// Runs `body` in a fresh world and always tears it down.
    private func withWorld(tierHTTP: String? = nil, _ body: (World) async throws -> Void) async throws {
        let world = try await World.make(tierHTTP: tierHTTP)
        do {
            try await body(world)
        } catch {
            await world.close()
            throw error
        }
        await world.close()
    }

    /// The cached bytes of `url` in the daemon's cache, if any.
    private func cached(_ daemon: DaemonProcess, _ url: String) throws -> [UInt8]? {
        let key = try ImageURL(url).cacheKey
        return FileManager.default.contents(atPath: daemon.folder + "/imgd-data/cache/" + key.relativePath).map(Array.init)
    }

    private func stats(_ daemon: DaemonProcess) async throws -> [String: Any] {
        try await daemon.result(#"{"cmd":"stats"}"#)
    }

    /// `curl` of `url` with `headers`, as any client of the tier: the status and `X-Cache-Status`.
    private func curl(_ url: String, headers: [String] = []) async throws -> (status: Int, cache: String) {
        let run = try await ChildProcess.run(
            "/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code} %header{x-cache-status}", "--max-time", "20"]
                + headers.flatMap { ["-H", $0] } + [url])
        let words = run.stdout.split(separator: " ").map(String.init)
        return (Int(words.first ?? "") ?? 0, words.count > 1 ? words[1] : "")
    }

    /// A configuration file in the world's scratch folder.
    private func configFile(_ world: World, _ text: String) throws -> String {
        let path = world.scratch.path + "/imgd.toml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// `get` of `url`: the reply, whole.
    private func get(_ daemon: DaemonProcess, _ url: String) async throws -> [String: Any] {
        try await daemon.call(#"{"cmd":"get","url":"\#(url)"}"#)
    }

    @Test("two daemons warm the same 500 URLs through one tier: the origin serves each once, both caches hold every image; with the tier stopped a get still succeeds")
    func twoDaemonsOneTier() async throws {
        try await withWorld { world in
            let first = try await world.daemon("a")
            let second = try await world.daemon("b")
            let targets = (0..<500).map { "/img/fleet-\($0).png?w=12&h=12" }
            let list = targets.map(world.origin.url).joined(separator: "\n") + "\n"
            try first.drop("fleet.txt", list)
            try second.drop("fleet.txt", list)
            for daemon in [first, second] {
                let done = try #require(await daemon.finishedList("fleet.txt", timeout: .seconds(240)), "log: \(daemon.log)")
                #expect(done["cached"] as? Int == 500 && done["failed"] as? Int == 0, "\(done)")
            }
            let counts = targets.map { world.origin.requestCount($0) }
            #expect(counts.allSatisfy { $0 == 1 }, "origin requests per URL other than 1: \(Dictionary(grouping: counts, by: { $0 }).mapValues(\.count))")
            #expect(world.origin.totalRequests == 500)
            for daemon in [first, second] {
                for target in targets {
                    #expect(try cached(daemon, world.origin.url(target)) == TestHTTPServer.body(for: target), "\(target)")
                }
                // The index keeps the origin URL, not the tier's.
                #expect(try await stats(daemon)["tier_fallbacks"] as? Int == 0)
            }
            // Every request reached the tier in its URL form, and each URL was fetched from the
            // origin once (a MISS; the rest HIT, or waited on the first one's lock).
            let misses = await world.tier.logged(atLeast: 500) { $0.hasSuffix("cache=MISS") }.count
            #expect(misses == 500, "tier misses: \(misses)")
            #expect(await world.tier.requests(for: world.origin.url(targets[0]), atLeast: 2).count == 2)

            // The tier goes away: a get of a new URL is fetched from the origin directly.
            await world.tier.stop()
            let fresh = world.origin.url("/img/after-tier.png?w=9&h=9")
            let reply = try await get(first, fresh)
            #expect(reply["ok"] as? Bool == true, "\(reply)\n\(first.log)")
            #expect(try cached(first, fresh) == TestHTTPServer.body(for: "/img/after-tier.png?w=9&h=9"))
            #expect(world.origin.requestCount("/img/after-tier.png?w=9&h=9") == 1)
            #expect(try await stats(first)["tier_fallbacks"] as? Int == 1)
            #expect(first.log.contains("tier \(world.tier.url)"), "the fallback is logged: \(first.log)")
            _ = await first.stop()
            _ = await second.stop()
        }
    }

    @Test("a 502 upstream from the tier falls back to the origin (once logged per cause); the next URL goes through the tier again")
    func upstreamFailureThenTier() async throws {
        try await withWorld { world in
            // An origin whose certificate the tier does not trust (another CA), but imgd does.
            let rogue = try await TestHTTPServer.start(
                tls: try await World.ipCertificate(signedBy: "rogue-ca", world.certificates, in: world.scratch))
            defer { Task { try? await rogue.shutdown() } }
            let bothCAs = world.scratch.path + "/both-cas.pem"
            let pem = try String(contentsOfFile: world.certificates.caFile, encoding: .utf8)
                + (try String(contentsOfFile: world.certificates.folder + "/rogue-ca.pem", encoding: .utf8))
            try pem.write(toFile: bothCAs, atomically: true, encoding: .utf8)
            let daemon = try await world.daemon("a", caFile: bothCAs)

            for index in 0..<2 {
                let target = "/img/rogue-\(index).png?w=6&h=6"
                let reply = try await get(daemon, rogue.url(target))
                #expect(reply["ok"] as? Bool == true, "\(reply)")
                #expect(try cached(daemon, rogue.url(target)) == TestHTTPServer.body(for: target))
                #expect(rogue.requestCount(target) == 1, "only imgd's direct request reached the origin")
                #expect(await world.tier.requests(for: rogue.url(target), atLeast: 1).map { $0.split(separator: " ")[1] } == ["502"])
            }
            #expect(try await stats(daemon)["tier_fallbacks"] as? Int == 2)
            let logged = daemon.log.split(separator: "\n").filter { $0.contains("tier \(world.tier.url)") }
            #expect(logged.count == 1, "one line per cause: \(logged)")
            #expect(logged.first?.contains("502 upstream") == true, "\(logged)")

            let good = "/img/after-rogue.png?w=6&h=6"
            let reply = try await get(daemon, world.origin.url(good))
            #expect(reply["ok"] as? Bool == true, "\(reply)")
            #expect(await world.tier.requests(for: world.origin.url(good), atLeast: 1).map { $0.split(separator: " ")[1] } == ["200"])
            #expect(world.origin.requestCount(good) == 1)
            #expect(try await stats(daemon)["tier_fallbacks"] as? Int == 2)
            _ = await daemon.stop()
            try await rogue.shutdown()
        }
    }

    @Test("a 403 denied from the tier fails the URL without reaching the origin")
    func deniedByTier() async throws {
        try await withWorld { world in
            let daemon = try await world.daemon("a")
            // `localhost` is on the tier's deny list; imgd itself would reach it.
            let url = "https://localhost:\(world.origin.port)/img/denied.png"
            let reply = try await get(daemon, url)
            let error = reply["error"] as? [String: Any] ?? [:]
            #expect(error["code"] as? String == "policy_denied", "\(reply)")
            #expect((error["message"] as? String)?.contains("403 denied") == true, "\(reply)")
            #expect(world.origin.totalRequests == 0)
            #expect(await world.tier.requests(for: url, atLeast: 1).count == 1)
            #expect(try await stats(daemon)["tier_fallbacks"] as? Int == 0)
            // The next URL goes through.
            let good = try await get(daemon, world.origin.url("/img/after-denied.png"))
            #expect(good["ok"] as? Bool == true, "\(good)")
            _ = await daemon.stop()
        }
    }

    @Test("a redirect passed through by the tier is resolved against the origin URL and fetched through the tier")
    func redirectThroughTier() async throws {
        try await withWorld { world in
            let daemon = try await world.daemon("a")
            let target = "/img/moved-here.png?w=7&h=5"
            let start = "/redirect?to=" + "img/moved-here.png?w=7&h=5".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let reply = try await get(daemon, world.origin.url(start))
            #expect(reply["ok"] as? Bool == true, "\(reply)")
            // Cached under the URL asked for, with the target's bytes.
            #expect(try cached(daemon, world.origin.url(start)) == TestHTTPServer.body(for: target))
            #expect(await world.tier.requests(for: world.origin.url(start), atLeast: 1).count == 1)
            #expect(await world.tier.requests(for: world.origin.url(target), atLeast: 1).count == 1, "\(world.tier.accessLog)")
            #expect(world.origin.requestLog == [start, target])
            #expect(try await stats(daemon)["tier_fallbacks"] as? Int == 0)
            _ = await daemon.stop()
        }
    }

    @Test("tier-fallback = false: a stopped tier is an ordinary failure; a reload to true falls back")
    func noFallbackThenReload() async throws {
        try await withWorld { world in
            let config = world.scratch.path + "/imgd.toml"
            try "tier-fallback = false\nattempts = 1\n".write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try await world.daemon("a", ["--config", config])
            await world.tier.stop()
            let first = try await get(daemon, world.origin.url("/img/no-fallback.png"))
            #expect((first["error"] as? [String: Any])?["code"] as? String == "connect", "\(first)")
            #expect(world.origin.totalRequests == 0)
            #expect(try await stats(daemon)["tier_fallbacks"] as? Int == 0)

            try "tier-fallback = true\nattempts = 1\n".write(toFile: config, atomically: true, encoding: .utf8)
            kill(daemon.pid, SIGHUP)
            #expect(await eventually(timeout: .seconds(10)) { daemon.log.contains("reloaded: tier-fallback = true") }, "\(daemon.log)")
            let second = try await get(daemon, world.origin.url("/img/fallback-now.png"))
            #expect(second["ok"] as? Bool == true, "\(second)")
            #expect(world.origin.requestCount("/img/fallback-now.png") == 1)
            #expect(try await stats(daemon)["tier_fallbacks"] as? Int == 1)
            _ = await daemon.stop()
        }
    }

    @Test("a host with headers of its own is asked directly, never through the tier: anyone asking the tier for its URL gets the origin's anonymous 403, not the private image")
    func hostHeadersSkipTheTier() async throws {
        try await withWorld { world in
            // Plain http to the origin's own port: headers go there only with headers-over-http.
            let config = try configFile(
                world, "[host.\"127.0.0.1:\(world.origin.port)\"]\nheaders = { X-Api-Key = \"s3cret\" }\nheaders-over-http = true\n")
            let daemon = try await world.daemon("a", ["--config", config])
            let target = "/private/mine.png?key=s3cret&w=5&h=5"
            let url = world.origin.url(target)
            let reply = try await get(daemon, url)
            #expect(reply["ok"] as? Bool == true, "\(reply)")
            #expect(try cached(daemon, url) == TestHTTPServer.body(for: target))
            // Asked directly, with the header.
            #expect(world.origin.requests.filter { $0.target == target }.map { $0.values(of: "X-Api-Key") } == [["s3cret"]])
            #expect(try await stats(daemon)["tier_fallbacks"] as? Int == 0)

            // Another client of the tier, without the header.
            let anonymous = try await curl(world.tier.url + NginxTier.tierPath(of: url))
            #expect(anonymous.status == 403 && anonymous.cache != "HIT", "\(anonymous)")
            // The tier saw that request only: imgd's never went through it.
            let lines = await world.tier.requests(for: url, atLeast: 1)
            #expect(lines.count == 1 && lines.first?.contains(" 403 ") == true, "\(world.tier.accessLog)")
            _ = await daemon.stop()
        }
    }

    @Test("the shipped tier fetches anonymously: a client's secret header does not reach the origin, and nothing private is cached")
    func tierForwardsNoSecret() async throws {
        try await withWorld { world in
            let target = "/private/theirs.png?key=s3cret&w=5&h=5"
            let tierURL = world.tier.url + NginxTier.tierPath(of: world.origin.url(target))
            let withKey = try await curl(tierURL, headers: ["X-Api-Key: s3cret", "PRIVATE-TOKEN: t0ken", "User-Agent: fleet-test"])
            #expect(withKey.status == 403, "\(withKey)")
            let anonymous = try await curl(tierURL)
            #expect(anonymous.status == 403 && anonymous.cache != "HIT", "\(anonymous)")
            let seen = world.origin.requests.filter { $0.target == target }
            #expect(seen.count == 2 && seen.allSatisfy { $0.values(of: "X-Api-Key").isEmpty && $0.values(of: "PRIVATE-TOKEN").isEmpty })
            // User-Agent is not a secret: it is forwarded.
            #expect(seen.first?.values(of: "User-Agent") == ["fleet-test"], "\(seen)")
        }
    }

    /// `inside.test` stands for a public name whose DNS answer is an inside address (`::1`, on
    /// the deny list), where the egress firewall refuses the tier's connection: nothing listens
    /// at `[::1]:1`, so the tier's connect fails as a firewall's reject makes it fail.
    private static let insideName = "upstream inside.test { server [::1]:1; }"

    @Test("a name the tier may not reach (its address is on the deny list; the egress firewall refused it) fails policy_denied with tier-fallback = true, and imgd never asks it directly; a stopped tier still falls back")
    func egressRefusalNeverFallsBack() async throws {
        try await withWorld(tierHTTP: Self.insideName) { world in
            let config = try configFile(world, "tier-fallback = true\nattempts = 1\n")
            let daemon = try await world.daemon("a", ["--config", config])
            let url = "http://inside.test/img/inside.png"
            let reply = try await get(daemon, url)
            let error = reply["error"] as? [String: Any] ?? [:]
            #expect(error["code"] as? String == "policy_denied", "\(reply)\n\(daemon.log)")
            #expect((error["message"] as? String)?.contains("403 denied-address") == true, "\(reply)")
            #expect(try await stats(daemon)["tier_fallbacks"] as? Int == 0)
            #expect(!daemon.log.contains("tier \(world.tier.url)"), "no fallback is logged: \(daemon.log)")
            #expect(await world.tier.requests(for: url, atLeast: 1).map { $0.split(separator: " ")[1] } == ["403"])

            // A tier that is down is an outage, not a refusal: the origin is asked directly.
            await world.tier.stop()
            let good = try await get(daemon, world.origin.url("/img/tier-down.png"))
            #expect(good["ok"] as? Bool == true, "\(good)")
            #expect(world.origin.requestCount("/img/tier-down.png") == 1)
            #expect(try await stats(daemon)["tier_fallbacks"] as? Int == 1)
            _ = await daemon.stop()
        }
    }
}
