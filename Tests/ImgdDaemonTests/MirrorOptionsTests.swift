import Foundation
import ImgdCore
import ImgdTestSupport
@testable import ImgdDaemon
import Testing

/// Mirrors as the state database keeps them (a restart takes an item's `mirrors` with it), and
/// a host table's mirror hosts as URLs are put on them.
@Suite("Mirrors: kept with their item, and put on a mirror host", .offThePool)
struct MirrorOptionsTests {
    @Test("an item's mirrors survive the state database being closed and opened again, and the mirror that served a URL is kept")
    func mirrorsSurviveARestart() throws {
        let folder = try ListStoreOwnerTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = LinkListItemOptions()
        try options.addMirror("https://b.example/x.png", index: 0)
        try options.addMirror("http://c.example:8080/y.png?q=1", index: 1)
        let id: Int
        do {
            let store = try ListStore(path: folder + "/state.sqlite")
            let claimed = try store.beginClaim(fileName: "m.json", format: "json", pinMilliseconds: nil, at: 1_000, owner: 0)
            id = claimed.id
            try store.addLines(list: id, [
                (1, 1, "https://a.example/x.png", nil, options), (2, 2, "https://a.example/plain.png", nil, .none),
            ])
            try store.finishClaim(list: id)
        }
        let store = try ListStore(path: folder + "/state.sqlite")
        let pending = try store.pendingURLs(list: id, after: 0, limit: 10)
        #expect(pending.map(\.options.mirrors.count) == [2, 0])
        #expect(pending.first?.options.mirrors.map(\.normalized) == ["https://b.example/x.png", "http://c.example:8080/y.png?q=1"])
        try store.record([(id, 1, .cached(bytes: 10, servedBy: "https://b.example/x.png")), (id, 2, .cached(bytes: 5))])
        let served = try store.servedByMirror(list: id, limit: 10)
        #expect(served.count == 1 && served.first?.url == "https://a.example/x.png" && served.first?.servedBy == "https://b.example/x.png")
    }

    @Test("mirror hosts: host or host:port, nothing else; a URL keeps its scheme, path, query and port unless the mirror names one")
    func mirrorHosts() throws {
        let url = try ImageURL("https://a.example:8443/p/x.png?sig=1")
        #expect(url.onMirror(try MirrorHost("b.example"))?.normalized == "https://b.example:8443/p/x.png?sig=1")
        #expect(url.onMirror(try MirrorHost("C.Example:443"))?.normalized == "https://c.example/p/x.png?sig=1")
        #expect(url.onMirror(try MirrorHost("[::1]:9000"))?.normalized == "https://[::1]:9000/p/x.png?sig=1")
        #expect(try MirrorHost("[::1]").port == nil)
        for bad in ["", "b.example/path", "user@b.example", "b.example:0", "b.example:99999", "b.example:x", "https://b.example", "b.example?q"] {
            #expect(throws: ImageURLError.self, "\(bad)") { try MirrorHost(bad) }
        }
        var options = LinkListItemOptions()
        for index in 0..<LinkListItemOptions.maximumMirrors { try options.addMirror("https://m\(index).example/x.png", index: index) }
        #expect(throws: LinkListItemError.self) { try options.addMirror("https://one-too-many.example/x.png", index: 8) }
    }
}
