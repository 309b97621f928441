import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Quotas per user against the real daemon, root and a second uid (``OtherUser``, 65534): each
/// entry is charged to the uid that first caused it to be cached; a uid over its quota loses its
/// own least recently used entries only; pins count and stay; a body too large for what the uid
/// may hold fails `quota_exceeded` and costs nothing else; a reload lowering a limit evicts down;
/// bad tables are refused at start and on reload. The memory tier is off (`memory-limit = 0`) so
/// that a `get` with `fetch: false` answers from the disk tier only.
@Suite(
    "Quotas per user: charged to the first cause, LRU of the user over quota only, pins counted, quota_exceeded, reload",
    .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to act as a second uid"),
    .timeLimit(.minutes(5)), .offThePool)
struct DaemonQuotaTests {
    static let other = Int(OtherUser.uid)

    /// The `status.users` row of `uid` (nil: the unowned row).
    static func usage(_ daemon: DaemonProcess, uid: Int?) async throws -> [String: Any]? {
        let users = try await daemon.result(#"{"cmd":"status"}"#)["users"] as? [[String: Any]] ?? []
        return users.first { ($0["uid"] as? Int) == uid && (uid != nil || $0["uid"] is NSNull) }
    }

    /// Whether `url` is cached on disk under root's view of its key (no fetch).
    static func isCached(_ daemon: DaemonProcess, _ url: String) async throws -> Bool {
        let reply = try await daemon.call(jsonLine(["cmd": "get", "url": url, "fetch": false]))
        return reply["ok"] as? Bool == true
    }

    static func bytes(_ reply: [String: Any]) -> Int { reply["bytes"] as? Int ?? -1 }

    static func errorCode(_ reply: [String: Any]) -> String? {
        (reply["error"] as? [String: Any])?["code"] as? String
    }

    @Test("a member over quota loses only its own least recently used entries, root's stay; status.users is exact; the evictions say reason quota")
    func overQuotaEvictsOwnLRU() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", "memory-limit = 0\n[quota.\"uid:\(OtherUser.uid)\"]\nlimit = \"40KiB\"\n")
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch, ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["evicted"])
            // Root's three entries, fetched first: the oldest in the cache.
            let roots = (0..<3).map { server.url("/img/root\($0).png?bytes=10000") }
            var rootBytes = 0
            for url in roots { rootBytes += Self.bytes(try await daemon.result(jsonLine(["cmd": "get", "url": url]))) }

            // The member's six, about 10 KB each: 40 KiB holds four.
            let mine = (0..<6).map { server.url("/img/mine\($0).png?bytes=10000") }
            var sizes: [Int] = []
            for url in mine {
                sizes.append(Self.bytes(try await OtherUser.plain.result(jsonLine(["cmd": "get", "url": url]), socket: daemon.socket)))
            }
            #expect(sizes.allSatisfy { $0 > 9_000 && $0 < 11_000 }, "\(sizes)")
            // The two least recently used of the member's go; the rest, and every one of root's, stay.
            #expect(await eventually(timeout: .seconds(20)) { try await !Self.isCached(daemon, mine[1]) }, "the member is not brought under its quota")
            #expect(try await !Self.isCached(daemon, mine[0]))
            for url in mine[2...] { #expect(try await Self.isCached(daemon, url), "\(url) was evicted") }
            for url in roots { #expect(try await Self.isCached(daemon, url), "root's \(url) was evicted by the member's quota") }

            let member = try #require(try await Self.usage(daemon, uid: Self.other))
            #expect(member["bytes"] as? Int == sizes[2...].reduce(0, +), "\(member)")
            #expect(member["entries"] as? Int == 4, "\(member)")
            #expect(member["pinned_bytes"] as? Int == 0, "\(member)")
            #expect(member["limit"] as? Int == 40 * 1024, "\(member)")
            #expect(member["name"] as? String == "nobody", "\(member)")
            let root = try #require(try await Self.usage(daemon, uid: 0))
            #expect(root["bytes"] as? Int == rootBytes && root["entries"] as? Int == 3 && root["limit"] is NSNull, "\(root)")

            let evicted = await events.first("evicted", timeout: .seconds(10)) { $0["reason"] as? String == "quota" }
            #expect(evicted != nil, "no evicted event with reason quota")

            // imgctl usage prints the same figures as a table.
            let table = try await BinaryRunner.imgctl(["usage", "--socket", daemon.socket], in: scratch.path)
            #expect(table.status == 0 && table.stdout.contains("nobody") && table.stdout.contains("40 KiB"), "\(table.stdout)\(table.stderr)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a member's list (spool file owned by the member) is charged to the member; root's get of the same URL afterwards does not move the charge")
    func listChargedToItsOwner() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch, ["--memory-limit", "0"])
            defer { daemon.killIfRunning() }
            let urls = (0..<2).map { server.url("/img/listed\($0).png?bytes=5000") }
            try daemon.drop("member.txt", urls.joined(separator: "\n") + "\n", owner: OtherUser.uid)
            #expect(await daemon.finishedList("member.txt")?["state"] as? String == "done")
            let before = try #require(try await Self.usage(daemon, uid: Self.other))
            #expect(before["entries"] as? Int == 2, "\(before)")
            _ = try await daemon.result(jsonLine(["cmd": "get", "url": urls[0]]))
            #expect(try await Self.usage(daemon, uid: 0) == nil, "root's later get of a cached entry charged root")
            let after = try #require(try await Self.usage(daemon, uid: Self.other))
            #expect(after["bytes"] as? Int == before["bytes"] as? Int)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("pins count against the owner's quota and are never evicted by it; a body larger than the limit less the pins fails quota_exceeded with nothing else lost, and is not remembered")
    func pinsAndQuotaExceeded() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", "memory-limit = 0\n[quota.\"uid:\(OtherUser.uid)\"]\nlimit = \"40KiB\"\n")
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch, ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            let member = OtherUser.plain
            // Two pinned entries, 20 KB of the member's 40 KiB.
            let pinned = (0..<2).map { server.url("/img/pinned\($0).png?bytes=10000") }
            let added = try await member.result(jsonLine(["cmd": "add", "urls": pinned, "pin": "1h"]), socket: daemon.socket)
            #expect(added["accepted"] as? Int == 2)
            #expect(await eventually(timeout: .seconds(20)) {
                try await Self.usage(daemon, uid: Self.other)?["pinned_bytes"] as? Int ?? 0 > 19_000
            })
            // Four more of 10 KB: over the quota, so the unpinned LRU ones go, never the pinned.
            let loose = (0..<4).map { server.url("/img/loose\($0).png?bytes=10000") }
            for url in loose { _ = try await member.result(jsonLine(["cmd": "get", "url": url]), socket: daemon.socket) }
            #expect(await eventually(timeout: .seconds(20)) { try await !Self.isCached(daemon, loose[1]) })
            #expect(try await !Self.isCached(daemon, loose[0]))
            for url in pinned + loose[2...] { #expect(try await Self.isCached(daemon, url), "\(url) was evicted") }
            let usage = try #require(try await Self.usage(daemon, uid: Self.other))
            #expect((usage["bytes"] as? Int ?? .max) <= 40 * 1024, "\(usage)")

            // 25 KB is more than 40 KiB less 20 KB of pins: refused before it is published.
            let big = server.url("/img/big.png?bytes=25000")
            let refused = try await member.call(jsonLine(["cmd": "get", "url": big]), socket: daemon.socket)
            #expect(Self.errorCode(refused) == "quota_exceeded", "\(refused)")
            let message = (refused["error"] as? [String: Any])?["message"] as? String ?? ""
            #expect(message.contains("uid \(OtherUser.uid)") && message.contains("40 KiB"), "\(message)")
            #expect(try await !Self.isCached(daemon, big))
            for url in pinned + loose[2...] { #expect(try await Self.isCached(daemon, url), "\(url) was lost to a refused body") }
            let unchanged = try #require(try await Self.usage(daemon, uid: Self.other))
            #expect(unchanged["bytes"] as? Int == usage["bytes"] as? Int && unchanged["entries"] as? Int == usage["entries"] as? Int)
            #expect(server.requestCount(prefix: "/img/big.png") == 1, "quota_exceeded was retried")

            // Not remembered against the URL: root (no quota) fetches it at once.
            let rootGet = try await daemon.result(jsonLine(["cmd": "get", "url": big]))
            #expect(rootGet["source"] as? String == "network", "\(rootGet)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a member's list with an item too large for its quota: the report names quota_exceeded, the other items are cached")
    func listReportNamesQuotaExceeded() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", "quota-per-user = \"16KiB\"\n")
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch, ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            let small = server.url("/img/small.png?bytes=4000"), big = server.url("/img/huge-body.png?bytes=20000")
            try daemon.drop("quota.txt", small + "\n" + big + "\n", owner: OtherUser.uid)
            // A list with a failure finishes in failed/.
            let report = try #require(await daemon.report("quota.txt", in: "failed", timeout: .seconds(30)))
            let byCode = report["failed_by_code"] as? [String: Any] ?? [:]
            #expect(byCode["quota_exceeded"] as? Int == 1, "\(report)")
            #expect(try await Self.isCached(daemon, small))
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a reload lowering a member's limit evicts it down at once (LRU first); root's entries stay; a bad table on reload is refused and the running quotas stay")
    func reloadLowersLimit() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let config = scratch.path + "/imgd.toml"
        try scratch.write("imgd.toml", "memory-limit = 0\n[quota.\"nobody\"]\nlimit = \"1MiB\"\n")
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch, ["--config", config])
            defer { daemon.killIfRunning() }
            let roots = (0..<2).map { server.url("/img/r\($0).png?bytes=10000") }
            for url in roots { _ = try await daemon.result(jsonLine(["cmd": "get", "url": url])) }
            let mine = (0..<4).map { server.url("/img/m\($0).png?bytes=10000") }
            for url in mine { _ = try await OtherUser.plain.result(jsonLine(["cmd": "get", "url": url]), socket: daemon.socket) }
            #expect(try await Self.usage(daemon, uid: Self.other)?["entries"] as? Int == 4)

            // A bad table on reload: refused naming it; the running quota (1 MiB) and every entry stay.
            try scratch.write("imgd.toml", "memory-limit = 0\n[quota.\"nobody\"]\nlimit = \"25KiB\"\n[quota.\"no-such-user-imgd\"]\nlimit = \"1MiB\"\n")
            let bad = try await daemon.call(#"{"cmd":"reload"}"#)
            #expect(Self.errorCode(bad) == "reload_failed", "\(bad)")
            let badMessage = (bad["error"] as? [String: Any])?["message"] as? String ?? ""
            #expect(badMessage.contains("[quota.\"no-such-user-imgd\"]") && badMessage.contains("no user named"), "\(badMessage)")
            #expect(try await Self.usage(daemon, uid: Self.other)?["limit"] as? Int == 1 << 20)
            for url in roots + mine { #expect(try await Self.isCached(daemon, url)) }

            try scratch.write("imgd.toml", "memory-limit = 0\n[quota.\"nobody\"]\nlimit = \"25KiB\"\n")
            let reload = try await daemon.result(#"{"cmd":"reload"}"#)
            let messages = reload["messages"] as? [String] ?? []
            #expect(messages.contains { $0.hasPrefix("reloaded: quota tables = nobody (uid \(OtherUser.uid)): 25 KiB") }, "\(messages)")
            #expect(await eventually(timeout: .seconds(20)) { try await Self.usage(daemon, uid: Self.other)?["entries"] as? Int == 2 })
            #expect(try await !Self.isCached(daemon, mine[0]))
            #expect(try await !Self.isCached(daemon, mine[1]))
            for url in roots + mine[2...] { #expect(try await Self.isCached(daemon, url)) }
            #expect(try await Self.usage(daemon, uid: Self.other)?["limit"] as? Int == 25 * 1024)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("bad quota tables are refused at start naming the file, line and table: unknown user, bad size, unknown key, no limit, a second table for one uid")
    func badTablesAtStart() async throws {
        try await expectConfigurationRefused(
            "[quota.\"no-such-user-imgd\"]\nlimit = \"1MiB\"\n", line: 1, mentions: "[quota.\"no-such-user-imgd\"]: no user named no-such-user-imgd")
        try await expectConfigurationRefused(
            "[quota.\"uid:1000\"]\nlimit = \"lots\"\n", line: 2, mentions: "[quota.\"uid:1000\"] limit:")
        try await expectConfigurationRefused(
            "[quota.\"uid:1000\"]\nlimit = \"1MiB\"\nmax-rate = 5\n", line: 3, mentions: "unknown setting max-rate in [quota.\"uid:1000\"] (known: limit)")
        try await expectConfigurationRefused("[quota.\"root\"]\n", line: 1, mentions: "[quota.\"root\"]: no limit")
        try await expectConfigurationRefused(
            "[quota.\"root\"]\nlimit = \"1MiB\"\n[quota.\"uid:0\"]\nlimit = \"none\"\n", line: 3, mentions: "a second table for uid 0")
        try await expectConfigurationRefused("quota-per-user = \"12\"\n", line: 1, mentions: "quota-per-user: at least 1 KiB")
    }
}
