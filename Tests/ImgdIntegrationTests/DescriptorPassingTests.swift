import Foundation
import ImgdClient
import ImgdCore
import ImgdProtocol
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `get` with `"fd": true` (Protocol.md, *get*): a read-only descriptor of the entry's file passed
/// with the reply (SCM_RIGHTS), against the real daemon and the test server; `imgctl get -o`
/// and ImgdClient on top of it.
@Suite("imgd: verified descriptors passed with get (the real binary)", .timeLimit(.minutes(10)), .offThePool)
struct DescriptorPassingTests {
    /// Every byte `descriptor` reads, from its start.
    static func contents(of descriptor: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var offset = 0
        while true {
            let count = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
            guard count > 0 else { break }
            bytes += chunk[0..<count]
            offset += count
        }
        return bytes
    }

    /// A daemon with its socket at `scratch/imgd.sock`, its data in `scratch/imgd-data`.
    static func start(_ scratch: ScratchFolder, arguments: [String] = []) async throws -> DaemonProcess {
        chmod(scratch.path, 0o755)
        let socket = scratch.path + "/imgd.sock"
        return try await DaemonProcess.start(in: scratch.path, arguments: ["--socket", socket] + arguments, socket: socket)
    }

    @Test(
        "a second uid that may use the socket but not enter the cache folder gets the image with imgctl get -o; opening the reply's path fails",
        .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to run imgctl as a second uid"))
    func otherUser() async throws {
        try await withRunningServer { server in
            let scratch = try ScratchFolder()
            defer { scratch.remove() }
            // Over max-data-bytes: the bytes cannot come in the reply, only through the descriptor.
            let daemon = try await Self.start(scratch, arguments: ["--max-data-bytes", "1000"])
            defer { daemon.killIfRunning() }
            try OtherUser.share(daemon.socket)
            let route = "/img/other-user.png?bytes=20000"
            let expected = try #require(TestHTTPServer.body(for: route))
            try #require(expected.count > 1000)
            let url = server.url(route)
            let first = try await daemon.result(#"{"cmd":"get","url":"\#(url)"}"#)
            let path = try #require(first["path"] as? String)
            // The cache folder as the unit makes it (0750, imgd's group): closed to other users.
            let cache = scratch.path + "/imgd-data/cache"
            try #require(path.hasPrefix(cache + "/"), "\(path)")
            try #require(chmod(cache, 0o700) == 0)

            let out = scratch.path + "/out"
            try #require(mkdir(out, 0o755) == 0 && chown(out, OtherUser.uid, OtherUser.gid) == 0)
            let run = try await OtherUser.plain.imgctl(["get", "-o", out + "/image.png", url], socket: daemon.socket)
            #expect(run.status == 0, "exit \(run.status): \(run.stdout)\(run.stderr)")
            #expect(FileManager.default.contents(atPath: out + "/image.png").map(Array.init) == expected)
            let toStdout = try await OtherUser.plain.imgctl(["get", "-o", "-", url], socket: daemon.socket)
            #expect(toStdout.status == 0, "exit \(toStdout.status): \(toStdout.stderr)")

            // The path it would get instead is out of its reach.
            let printed = try await OtherUser.plain.imgctl(["get", url], socket: daemon.socket)
            #expect(printed.status == 0, "\(printed.stderr)")
            let opened = try await ChildProcess.run(
                OtherUser.setpriv,
                ["--reuid=\(OtherUser.uid)", "--regid=\(OtherUser.gid)", "--clear-groups", "--", "/bin/cat", printed.stdout.trimmingCharacters(in: .newlines)],
                in: "/", environment: ["PATH": "/usr/bin:/bin"], timeout: .seconds(60))
            #expect(opened.status != 0 && opened.stderr.contains("Permission denied"), "exit \(opened.status): \(opened.stderr)")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    @Test("hello announces fd; the descriptor still reads every byte with the reply's SHA-256 after evict and purge removed the entry")
    func evictionWhileHeld() async throws {
        try await withRunningServer { server in
            let scratch = try ScratchFolder()
            defer { scratch.remove() }
            let daemon = try await Self.start(scratch)
            defer { daemon.killIfRunning() }
            let url = server.url("/img/held.png?bytes=50000")
            let expected = try #require(TestHTTPServer.body(for: "/img/held.png?bytes=50000"))
            let socket = daemon.socket
            let (features, image) = try await onOwnThread {
                Result { () throws(ImgdClientError) in
                    let connection = try ImgdConnection(connectingTo: socket)
                    defer { connection.close() }
                    return (try connection.features(), try connection.get(url, options: GetOptions(descriptor: true)))
                }
            }.get()
            #expect(features.contains("fd"))
            let file = try #require(image.file, "no descriptor with the reply: \(image.result.jsonText)")
            #expect(image.sha256 == SHA256Digest(of: expected).hex && image.bytes == expected.count)
            #expect(fcntl(file.rawValue, F_GETFL) & O_ACCMODE == O_RDONLY, "read-only")
            #expect(fcntl(file.rawValue, F_GETFD) & FD_CLOEXEC != 0, "close-on-exec")

            _ = try await daemon.result(#"{"cmd":"evict","urls":["\#(url)"]}"#)
            _ = try await daemon.result(#"{"cmd":"purge","tier":"disk"}"#)
            #expect(access(image.path, F_OK) != 0, "the entry's name is gone")
            let read = Self.contents(of: file.rawValue)
            #expect(read.count == image.bytes && SHA256Digest(of: read).hex == image.sha256)
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    @Test("64 pipelined get fd:true on one connection: 64 descriptors, in order, each reading its own reply's image")
    func pipelined() async throws {
        try await withRunningServer { server in
            let scratch = try ScratchFolder()
            defer { scratch.remove() }
            let daemon = try await Self.start(scratch)
            defer { daemon.killIfRunning() }
            let routes = (0..<8).map { "/img/pipelined-\($0).png?bytes=\(3000 + $0 * 1000)" }
            for route in routes { _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url(route))"}"#) }
            let socket = daemon.socket
            let urls = routes.map { server.url($0) }
            let replies = try await onOwnThread {
                Result { () throws(ImgdClientError) -> [(sha256: String?, bytes: Int?, read: [UInt8]?)] in
                    let connection = try ImgdConnection(connectingTo: socket)
                    defer { connection.close() }
                    var ids: [Int] = []
                    for index in 0..<64 { ids.append(try connection.send("get", ["url": .string(urls[index % 8]), "fd": true])) }
                    return try ids.map { (id) throws(ImgdClientError) in
                        let reply = try connection.awaitReply(id: id)
                        return (reply.result["sha256"]?.stringValue, reply.result["bytes"]?.intValue, reply.descriptor.map { Self.contents(of: $0.rawValue) })
                    }
                }
            }.get()
            #expect(replies.count == 64)
            for (index, reply) in replies.enumerated() {
                let expected = TestHTTPServer.body(for: routes[index % 8])!
                #expect(reply.read == expected, "reply \(index)")
                #expect(reply.sha256 == SHA256Digest(of: expected).hex && reply.bytes == expected.count, "reply \(index)")
            }
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    /// The daemon's open descriptors.
    static func openDescriptors(of pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    @Test("a client that reads with plain read() (the kernel drops the descriptors) gets its replies, and the daemon keeps no descriptor")
    func plainReader() async throws {
        try await withRunningServer { server in
            let scratch = try ScratchFolder()
            defer { scratch.remove() }
            let daemon = try await Self.start(scratch)
            defer { daemon.killIfRunning() }
            let url = server.url("/img/plain.png")
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(url)"}"#)
            let before = Self.openDescriptors(of: daemon.pid)
            let socket = daemon.socket
            let replies = try await onOwnThread {
                Result {
                    let client = try ControlClient(path: socket)
                    var replies: [String] = []
                    for _ in 0..<50 { replies.append(try client.call(#"{"cmd":"get","url":"\#(url)","fd":true}"#)) }
                    replies.append(try client.call(#"{"cmd":"ping"}"#))
                    return replies
                }
            }.get()
            #expect(replies.dropLast().allSatisfy { $0.contains(#""ok":true"#) && $0.contains(#""sha256":"#) }, "\(replies.first ?? "")")
            #expect(replies.last?.contains(#""pong":true"#) == true)
            let settled = await eventually(timeout: .seconds(10)) { Self.openDescriptors(of: daemon.pid) <= before }
            #expect(settled, "the daemon holds \(Self.openDescriptors(of: daemon.pid)) descriptors, \(before) before")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    /// This process's descriptors open on files under `folder`.
    static func descriptors(under folder: String) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.filter { name in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name))?.hasPrefix(folder) == true
        }.count
    }

    @Test("ImgdAsyncClient: 100 concurrent gets over 4 connections each get their image's descriptor; cancelled calls leak no descriptor; events as an AsyncStream")
    func asyncClient() async throws {
        try await withRunningServer { server in
            let scratch = try ScratchFolder()
            defer { scratch.remove() }
            let daemon = try await Self.start(scratch)
            defer { daemon.killIfRunning() }
            let routes = (0..<10).map { "/img/async-\($0).png?bytes=\(2000 + $0 * 500)" }
            let client = try ImgdAsyncClient(socketPath: daemon.socket, connections: 4)
            let results = try await withThrowingTaskGroup(of: (Int, String, [UInt8]?).self) { group in
                for index in 0..<100 {
                    group.addTask {
                        let image = try await client.get(server.url(routes[index % 10]), options: GetOptions(descriptor: true))
                        return (index, image.sha256, image.file.map { Self.contents(of: $0.rawValue) })
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.count == 100)
            for (index, sha256, read) in results {
                let expected = TestHTTPServer.body(for: routes[index % 10])!
                #expect(read == expected && sha256 == SHA256Digest(of: expected).hex, "get \(index)")
            }
            // Cancelled while waiting (held at the origin) or while queued behind others.
            let cache = scratch.path + "/imgd-data/cache"
            let held = (0..<8).map { server.url("/img/cancelled-\($0).png?gate=slow") }
            let tasks = held.map { url in
                Task { try await client.get(url, options: GetOptions(descriptor: true)) }
            }
            // Four sent (one per connection), held at the origin; four queued behind them.
            let sent = await eventually(timeout: .seconds(30)) {
                ((try? await daemon.result(#"{"cmd":"status"}"#))?["held"] as? Int ?? 0) >= 4
            }
            try #require(sent, "the gets did not reach the daemon: \(daemon.log)")
            for task in tasks { task.cancel() }
            for task in tasks {
                do {
                    _ = try await task.value
                } catch let error as ImgdClientError {
                    #expect(error == .cancelled)
                }
            }
            // Events on a connection of their own, as an AsyncStream.
            let events = try await client.events(["fetched"])
            server.openGate("slow")
            // The calls still run on their connections; their descriptors are closed there.
            for route in routes { _ = try await client.get(server.url(route), options: GetOptions(descriptor: true)) }
            let closed = await eventually(timeout: .seconds(30)) { Self.descriptors(under: cache) == 0 }
            #expect(closed, "\(Self.descriptors(under: cache)) descriptors into the cache still open")
            // A fetch after the subscription was confirmed: its event is in the stream.
            let fresh = server.url("/img/after-subscribe.png")
            _ = try await client.get(fresh)
            var seen = false
            for await event in events where event.data["url"]?.stringValue == fresh {
                seen = true
                break
            }
            #expect(seen)
            client.close()
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    @Test("refresh replacing entries while another client takes descriptors: every descriptor hashes to its own reply's SHA-256")
    func refreshRace() async throws {
        try await withRunningServer { server in
            let scratch = try ScratchFolder()
            defer { scratch.remove() }
            let daemon = try await Self.start(scratch, arguments: ["--refresh", "1d"])
            defer { daemon.killIfRunning() }
            // Each changes from its second request on: its first revalidation replaces the entry.
            let urls = (0..<20).map { server.url("/fresh/race-\($0).png?cc=no-cache&changes_at=2&w=32&h=32") }
            for url in urls { _ = try await daemon.result(#"{"cmd":"get","url":"\#(url)"}"#) }
            let socket = daemon.socket
            let done = UncheckedBox(Atomicity())
            let reader = Task {
                try await onOwnThread {
                    Result { () throws(ImgdClientError) -> (checked: Int, bad: [String], digests: Set<String>) in
                        let connection = try ImgdConnection(connectingTo: socket)
                        defer { connection.close() }
                        var checked = 0, bad: [String] = [], digests = Set<String>()
                        // Passes until one whole pass started after the refresh ended.
                        var last = false
                        while !last {
                            last = done.value.isSet && checked >= 200
                            for url in urls {
                                let image = try connection.get(url, options: GetOptions(descriptor: true))
                                guard let file = image.file else { bad.append("no descriptor for \(url)"); continue }
                                let read = Self.contents(of: file.rawValue)
                                if read.count != image.bytes || SHA256Digest(of: read).hex != image.sha256 { bad.append(url) }
                                digests.insert(image.sha256)
                                checked += 1
                                done.value.count()
                            }
                        }
                        return (checked, bad, digests)
                    }
                }.get()
            }
            // The reader has seen the old bodies before the refresh starts.
            let reading = await eventually(timeout: .seconds(30)) { done.value.counted >= 40 }
            try #require(reading)
            let refreshed = try await daemon.result(#"{"cmd":"refresh","urls":\#(Self.jsonArray(urls))}"#)
            // The entries are replaced by the revalidations the reader's own gets start (no-cache:
            // due at once) or by this refresh, whichever comes first: both race the reader.
            #expect(refreshed["failed"] as? Int == 0, "\(refreshed)")
            done.value.set()
            let outcome = try await reader.value
            #expect(outcome.bad.isEmpty, "descriptors not matching their reply: \(outcome.bad)")
            #expect(outcome.digests.count == 2 * urls.count, "the reader saw the old and the new body of each")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    static func jsonArray(_ strings: [String]) -> String {
        "[" + strings.map { "\"" + $0 + "\"" }.joined(separator: ",") + "]"
    }
}

/// A flag set once and a count, shared with the reader's thread.
final class Atomicity: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    private var done = 0
    var isSet: Bool { lock.withLock { flag } }
    func set() { lock.withLock { flag = true } }
    /// Descriptors checked so far.
    var counted: Int { lock.withLock { done } }
    func count() { lock.withLock { done += 1 } }
}
