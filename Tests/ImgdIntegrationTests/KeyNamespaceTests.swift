import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Chosen keys against a second member (uid 65534, ``OtherUser``) who wants another member's
/// image replaced by bytes of their own: a chosen key spelled as the victim's URL, with and
/// without the evil body's `sha256`, in `add`, `get` and a spool list, against a pinned entry;
/// then a `refresh` of the victim's URL. The real daemon, the real socket, the test origin.
@Suite(
    "Chosen keys: a namespace of their own per member; no member replaces another's image",
    .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to act as a second uid"),
    .timeLimit(.minutes(5)), .offThePool)
struct KeyNamespaceTests {
    private static func sha256(_ pathAndQuery: String) -> String {
        SHA256Digest(of: TestHTTPServer.body(for: pathAndQuery)!).hex
    }

    /// The cached file's bytes for `url` as root sees it (no fetch).
    private static func cached(_ daemon: DaemonProcess, _ url: String, key: String? = nil) async throws -> (sha256: String, body: Data)? {
        let keyField = key.map { #","key":"\#($0)""# } ?? ""
        let reply = try await daemon.call(#"{"cmd":"get","url":"\#(url)"\#(keyField),"fetch":false}"#)
        guard let result = reply["result"] as? [String: Any], let path = result["path"] as? String,
            let sha256 = result["sha256"] as? String
        else { return nil }
        return (sha256, try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test("a member's key spelled as another's URL (add, get, a spool list; with the evil body's sha256 too) never becomes that URL's entry, pinned or not; a refresh of the victim's URL revalidates the victim's own bytes")
    func keyAsVictimURL() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch)
            defer { daemon.killIfRunning() }
            let goodPath = "/fresh/good.png?cc=max-age%3D3600", evilPath = "/fresh/evil.png?cc=max-age%3D3600"
            let victim = server.url(goodPath), evil = server.url(evilPath)
            let good = Self.sha256(goodPath), bad = Self.sha256(evilPath)
            try #require(good != bad)

            // The victim (root) caches its image, pinned.
            _ = try await daemon.result(#"{"cmd":"add","urls":["\#(victim)"],"pin":"1h"}"#)
            #expect(await eventually(timeout: .seconds(20)) { try await Self.cached(daemon, victim)?.sha256 == good })

            // The member names the victim's URL as the key of their own image, every way there is.
            let member = OtherUser.plain
            _ = try await member.result(jsonLine(["cmd": "add", "urls": [["url": evil, "key": victim]]]), socket: daemon.socket)
            _ = try await member.result(jsonLine(["cmd": "add", "urls": [["url": evil, "key": victim, "sha256": bad]]]), socket: daemon.socket)
            let got = try await member.result(jsonLine(["cmd": "get", "url": evil, "key": victim, "sha256": bad]), socket: daemon.socket)
            #expect(got["sha256"] as? String == bad, "the member gets their own image under their own key: \(got)")
            _ = try await member.result(jsonLine(["cmd": "get", "url": evil, "key": victim]), socket: daemon.socket)
            let normalized = try ImageURL(victim).normalized
            try daemon.drop("evil.json", jsonLine([["url": evil, "key": victim, "sha256": bad], ["url": evil, "key": normalized]]), owner: OtherUser.uid)
            let list = try #require(await daemon.finishedList("evil.json"))
            #expect((list["cached"] as? Int ?? 0) + (list["already_cached"] as? Int ?? 0) == 2, "\(list)")
            #expect(await eventually(timeout: .seconds(20)) { (try await daemon.result(#"{"cmd":"status"}"#)["queued"] as? Int) == 0 })

            // The victim's URL still names the victim's bytes.
            let after = try #require(try await Self.cached(daemon, victim))
            #expect(after.sha256 == good, "the victim's entry was replaced")
            #expect(after.body == Data(TestHTTPServer.body(for: goodPath)!))
            // Root naming the same text as a key of its own finds nothing: the member's entry is
            // the member's.
            let rootsKey = try await daemon.call(#"{"cmd":"get","url":"http://unused.invalid/x.png","key":"\#(victim)","fetch":false}"#)
            #expect((rootsKey["error"] as? [String: Any])?["code"] as? String == "not_found", "\(rootsKey)")

            // A refresh of the victim's URL sends the victim's own validators and keeps its bytes.
            let refreshed = try await daemon.result(#"{"cmd":"refresh","urls":["\#(victim)"]}"#)
            #expect(refreshed["revalidated"] as? Int == 1, "\(refreshed)")
            #expect(try await Self.cached(daemon, victim)?.sha256 == good)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a member's chosen key is theirs: another member naming it (with another sha256 too) gets an entry of their own, and the first member's bytes stay")
    func keyOfAnotherMember() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch)
            defer { daemon.killIfRunning() }
            let mine = server.url("/img/mine.png?seed=3"), theirs = server.url("/img/theirs.png?seed=4")
            let good = Self.sha256("/img/mine.png?seed=3"), bad = Self.sha256("/img/theirs.png?seed=4")
            // Root's list relies on the key "logo".
            try daemon.drop("mine.json", jsonLine([["url": mine, "key": "logo", "pin": "1h"]]))
            _ = try #require(await daemon.finishedList("mine.json"))
            #expect(try await Self.cached(daemon, "http://unused.invalid/x.png", key: "logo")?.sha256 == good)

            let member = OtherUser.plain
            let got = try await member.result(jsonLine(["cmd": "get", "url": theirs, "key": "logo", "sha256": bad]), socket: daemon.socket)
            #expect(got["sha256"] as? String == bad)
            try daemon.drop("theirs.json", jsonLine([["url": theirs, "key": "logo", "sha256": bad]]), owner: OtherUser.uid)
            _ = try #require(await daemon.finishedList("theirs.json"))

            #expect(try await Self.cached(daemon, "http://unused.invalid/x.png", key: "logo")?.sha256 == good, "root's key was replaced")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("validators go only to the URL whose response gave them: an entry of a chosen key used through another URL is refetched, not revalidated")
    func validatorsOfAnotherURL() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch)
            defer { daemon.killIfRunning() }
            // Both routes answer ETag "v1": a conditional request with B's validators sent to C
            // would get a 304 from C for bytes C never sent.
            let b = server.url("/fresh/b.png?cc=max-age%3D3600"), c = server.url("/fresh/c.png?cc=max-age%3D3600")
            try #require(Self.sha256("/fresh/b.png?cc=max-age%3D3600") != Self.sha256("/fresh/c.png?cc=max-age%3D3600"))
            let first = try await daemon.result(jsonLine(["cmd": "get", "url": b, "key": "k"]))
            #expect(first["sha256"] as? String == Self.sha256("/fresh/b.png?cc=max-age%3D3600"))
            // Due through C: served as it is, and C asked without B's validators.
            let due = try await daemon.result(jsonLine(["cmd": "get", "url": c, "key": "k", "refresh": "0s"]))
            #expect(["disk", "memory"].contains(due["source"] as? String ?? ""), "\(due)")
            #expect(await eventually(timeout: .seconds(20)) { server.requestCount(prefix: "/fresh/c.png") == 1 })
            let request = try #require(server.requests.last { $0.target.hasPrefix("/fresh/c.png") })
            #expect(request.values(of: "If-None-Match").isEmpty, "B's ETag went to C")
            #expect(request.values(of: "If-Modified-Since").isEmpty, "B's Last-Modified went to C")
            #expect(await eventually(timeout: .seconds(20)) {
                try await Self.cached(daemon, c, key: "k")?.sha256 == Self.sha256("/fresh/c.png?cc=max-age%3D3600")
            }, "the entry holds C's own bytes once C answered")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("entries an earlier version stored under a key that is not their URL's (another URL's, pinned; an old chosen key) are removed at the first start and fetched again when asked for")
    func foreignKeysFromAnEarlierVersion() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let victim = server.url("/img/victim.png?seed=1"), evil = server.url("/img/evil.png?seed=2")
            var daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            for url in [victim, evil] { _ = try await daemon.result(jsonLine(["cmd": "get", "url": url])) }
            _ = try await daemon.result(jsonLine(["cmd": "get", "url": server.url("/img/k.png?seed=3"), "key": "product-7"]))
            #expect(await daemon.stop() == 0)

            // What an earlier imgd let a member do: the evil body as the victim URL's entry,
            // pinned; and a chosen key hashed like a URL.
            let cache = scratch.path + "/imgd-data/cache"
            let victimKey = CacheKey(url: try ImageURL(victim)), evilKey = CacheKey(url: try ImageURL(evil))
            let chosenNow = CacheKey(chosen: "product-7", owner: 0), chosenBefore = CacheKey(normalizedURL: "product-7")
            let sql = """
                DELETE FROM entries WHERE key = x'\(victimKey.hex)';
                UPDATE entries SET key = x'\(victimKey.hex)', pinned_until = 9000000000000000 WHERE key = x'\(evilKey.hex)';
                UPDATE entries SET key = x'\(chosenBefore.hex)' WHERE key = x'\(chosenNow.hex)';
                DELETE FROM meta WHERE name = 'keys_version';
                """
            let edited = try await ChildProcess.run("/usr/bin/sqlite3", [cache + "/index.sqlite", sql])
            try #require(edited.status == 0, "\(edited.stderr)")
            try #require(rename(cache + "/" + evilKey.relativePath, cache + "/" + victimKey.relativePath) == 0)
            try #require(rename(cache + "/" + chosenNow.relativePath, cache + "/" + chosenBefore.relativePath) == 0)

            daemon = try await DaemonProcess.start(in: scratch.path)
            #expect(daemon.log.contains("removed 2 cache entries"), "\(daemon.log)")
            let gone = try await daemon.call(jsonLine(["cmd": "get", "url": victim, "fetch": false]))
            #expect((gone["error"] as? [String: Any])?["code"] as? String == "not_found", "the poisoned entry is still served: \(gone)")
            let fetched = try await daemon.result(jsonLine(["cmd": "get", "url": victim]))
            #expect(fetched["sha256"] as? String == Self.sha256("/img/victim.png?seed=1"))
            #expect((try await daemon.result(#"{"cmd":"status"}"#)["cache"] as? [String: Any])?["entries"] as? Int == 1)
            #expect(!FileManager.default.fileExists(atPath: cache + "/" + chosenBefore.relativePath))
            #expect(await daemon.stop() == 0)

            // Checked once: a later start removes nothing and says nothing.
            daemon = try await DaemonProcess.start(in: scratch.path)
            #expect(!daemon.log.contains("cache entries"), "\(daemon.log)")
            #expect(await daemon.stop() == 0)
        }
    }
}
