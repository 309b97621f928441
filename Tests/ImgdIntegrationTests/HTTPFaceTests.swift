import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The HTTP face (Protocol.md, *HTTP face*) of the real imgd, with real clients: curl, Python's
/// `http.client`, a raw socket for what they will not send, and nginx as a resizer in front.
@Suite("HTTP face (the real imgd, real clients)", .timeLimit(.minutes(10)), .offThePool)
struct HTTPFaceTests {
    /// A daemon with its HTTP face on a loopback TCP port, and the test origin.
    struct World {
        let server: TestHTTPServer
        let scratch: ScratchFolder
        let daemon: DaemonProcess
        let port: Int
        var address: String { "127.0.0.1:\(port)" }
        var base: String { "http://127.0.0.1:\(port)" }

        static func start(_ arguments: [String] = []) async throws -> World {
            let server = try await TestHTTPServer.start()
            let scratch = try ScratchFolder()
            let port = try freeTCPPort()
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--http-listen", "127.0.0.1:\(port)"] + arguments)
            // The control socket answers once both listeners are up (the face starts first).
            return World(server: server, scratch: scratch, daemon: daemon, port: port)
        }

        /// `target` of the test origin in the path form: `/http/127.0.0.1:PORT/target`.
        func pathForm(_ target: String) -> String {
            base + "/http/127.0.0.1:\(server.port)" + target
        }

        func finish() async throws {
            _ = await daemon.stop()
            try await server.shutdown()
            scratch.remove()
        }
    }

    /// curl with `arguments`; its stdout.
    static func curl(_ arguments: [String]) async throws -> ChildProcess.Output {
        try await ChildProcess.run("/usr/bin/curl", ["-s", "--max-time", "30"] + arguments)
    }

    /// curl's `-D -` output split into status, headers and the body written to `file`.
    static func fetch(_ url: String, _ extra: [String] = [], scratch: ScratchFolder) async throws -> (status: Int, headers: [String: String], body: [UInt8]) {
        let file = scratch.path + "/curl-body-\(UUID().uuidString)"
        let output = try await curl(["-D", "-", "-o", file] + extra + [url])
        let responses = RawHTTPConnection.responses(Array(output.stdout.utf8))
        let last = try #require(responses.last, "curl: \(output.stdout) \(output.stderr)")
        let body = FileManager.default.contents(atPath: file).map(Array.init) ?? []
        return (last.status, last.headers, body)
    }

    @Test("curl: the path form fetches once, then serves from cache; keep-alive; Range 206; If-None-Match 304; HEAD has headers and no body")
    func curlPathForm() async throws {
        let world = try await World.start()
        let target = "/img/face.png?w=40&h=30"
        let expected = try #require(TestHTTPServer.body(for: target))
        let digest = SHA256Digest(of: expected).hex

        let first = try await Self.fetch(world.pathForm(target), scratch: world.scratch)
        #expect(first.status == 200)
        #expect(first.body == expected)
        #expect(first.headers["content-type"] == "image/png")
        #expect(first.headers["content-length"] == "\(expected.count)")
        #expect(first.headers["etag"] == "\"\(digest)\"")
        #expect(first.headers["x-imgd-source"] == "network")
        #expect(first.headers["accept-ranges"] == "bytes")
        #expect(first.headers["last-modified"].flatMap(HTTPDate.milliseconds) != nil, "\(first.headers)")
        #expect(first.headers["cache-control"]?.hasPrefix("max-age=") == true)

        // Two more on one connection: one connect, both from the cache.
        let twice = try await Self.curl(["-o", "/dev/null", "-o", "/dev/null", "-w", "%{num_connects}:%{http_code}:%header{x-imgd-source}\n", world.pathForm(target), world.pathForm(target)])
        let lines = twice.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines[0].hasPrefix("1:200:") && lines[1].hasPrefix("0:200:"), "\(twice.stdout)")
        #expect(lines.allSatisfy { !$0.hasSuffix("network") }, "\(lines)")

        let range = try await Self.fetch(world.pathForm(target), ["-r", "10-109"], scratch: world.scratch)
        #expect(range.status == 206)
        #expect(range.body == Array(expected[10..<110]))
        #expect(range.headers["content-range"] == "bytes 10-109/\(expected.count)")
        let suffix = try await Self.fetch(world.pathForm(target), ["-r", "-5"], scratch: world.scratch)
        #expect(suffix.status == 206 && suffix.body == Array(expected.suffix(5)))
        let beyond = try await Self.fetch(world.pathForm(target), ["-r", "\(expected.count + 10)-"], scratch: world.scratch)
        #expect(beyond.status == 416 && beyond.headers["content-range"] == "bytes */\(expected.count)")

        let conditional = try await Self.fetch(world.pathForm(target), ["-H", "If-None-Match: W/\"x\", \"\(digest)\""], scratch: world.scratch)
        #expect(conditional.status == 304 && conditional.body.isEmpty)
        #expect(conditional.headers["etag"] == "\"\(digest)\"")
        let stale = try await Self.fetch(world.pathForm(target), ["-H", "If-None-Match: \"other\""], scratch: world.scratch)
        #expect(stale.status == 200 && stale.body == expected)

        let head = try await Self.curl(["-I", world.pathForm(target)])
        let headResponse = try #require(RawHTTPConnection.responses(Array(head.stdout.utf8), headRequests: [0]).first)
        #expect(headResponse.status == 200 && headResponse.header("content-length") == "\(expected.count)")

        // The origin was asked once, whatever came after.
        #expect(world.server.requestCount(target) == 1, "\(world.server.requestLog)")
        try await world.finish()
    }

    @Test("/image?url= on the Unix socket (curl --unix-socket): fetch=0 misses with 404; a query's + is kept; errors carry X-Imgd-Error and JSON")
    func imageQueryOnUnixSocket() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let socket = scratch.path + "/http.sock"
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--http-listen", "unix:" + socket])
        let target = "/img/q+plus.png?w=12&h=12"
        let encoded = server.url(target).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let miss = try await Self.fetch("http://imgd/image?url=\(encoded)&fetch=0", ["--unix-socket", socket], scratch: scratch)
        #expect(miss.status == 404 && miss.headers["x-imgd-error"] == "not_found")
        let problem = try JSONSerialization.jsonObject(with: Data(miss.body)) as? [String: Any]
        #expect(problem?["code"] as? String == "not_found")
        #expect(server.totalRequests == 0)

        let hit = try await Self.fetch("http://imgd/image?url=\(encoded)", ["--unix-socket", socket], scratch: scratch)
        #expect(hit.status == 200 && hit.body == TestHTTPServer.body(for: target))
        // The + reached the origin as a +, not as a space.
        #expect(server.requestCount(target) == 1, "\(server.requestLog)")

        // The socket file has the control socket's mode.
        var info = stat()
        #expect(stat(socket, &info) == 0 && info.st_mode & 0o777 == 0o660)
        _ = await daemon.stop()
        #expect(access(socket, F_OK) != 0, "the socket file is removed at stop")
        try await server.shutdown()
    }

    @Test("three pipelined requests in one write are answered in order, then the connection closes as the last asked")
    func pipelined() async throws {
        let world = try await World.start()
        let targets = ["/img/p1.png?w=9", "/img/p2.gif", "/img/p3.jpg"]
        let connection = try RawHTTPConnection(world.address)
        var requests = ""
        for (index, target) in targets.enumerated() {
            let path = "/http/127.0.0.1:\(world.server.port)" + target
            requests += "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (index == targets.count - 1 ? "Connection: close\r\n" : "") + "\r\n"
        }
        try connection.send(requests)
        let responses = RawHTTPConnection.responses(connection.readUntilClosed())
        #expect(responses.map(\.status) == [200, 200, 200])
        #expect(responses.map(\.body) == targets.map { TestHTTPServer.body(for: $0) ?? [] })
        #expect(responses.map { $0.header("content-type") } == ["image/png", "image/gif", "image/jpeg"])
        try await world.finish()
    }

    @Test("hostile input gets its status, and the daemon goes on serving: nothing cached, nothing fetched")
    func hostileInput() async throws {
        let world = try await World.start()
        let port = world.server.port
        let cases: [(name: String, request: String, status: Int, code: String?)] = [
            ("a 64 KiB header", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: \(String(repeating: "a", count: 65_536))\r\n\r\n", 431, "headers_too_large"),
            ("a 40 KiB URL", "GET /image?url=http://127.0.0.1/\(String(repeating: "b", count: 40_000)) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 431, "headers_too_large"),
            ("POST", "POST /image?url=http://127.0.0.1:\(port)/img/a.png HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", 405, "method_not_allowed"),
            ("DELETE", "DELETE /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405, "method_not_allowed"),
            ("a NUL in the request line", "GET /ima\u{0}ge HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, "bad_request"),
            ("not HTTP at all", "HELLO\r\n\r\n", 400, "bad_request"),
            ("an absolute-form target", "GET http://127.0.0.1:\(port)/img/a.png HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, "bad_request"),
            ("a file: URL", "GET /image?url=file%3A%2F%2F%2Fetc%2Fpasswd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, "invalid_argument"),
            ("a gopher: URL", "GET /image?url=gopher%3A%2F%2F127.0.0.1%2Fa HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, "invalid_argument"),
            ("a bad percent escape", "GET /image?url=http%3A%2F%2Fa%ZZ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, "bad_request"),
            ("a repeated parameter", "GET /image?url=http%3A%2F%2Fa%2Fb.png&url=http%3A%2F%2Fc%2Fd.png HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, "bad_request"),
            ("user information in the path form", "GET /http/user:pw@127.0.0.1:\(port)/img/a.png HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, "bad_url"),
            ("the metadata address", "GET /http/169.254.169.254/latest/meta-data HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 403, "policy_denied"),
            ("a body on a GET", "GET /http/127.0.0.1:\(port)/img/body.png HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000000000\r\n\r\n", 413, "request_body"),
            ("a chunked GET", "GET /http/127.0.0.1:\(port)/img/chunk.png HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 413, "request_body"),
            ("a web page's request (Origin)", "GET /http/127.0.0.1:\(port)/img/o.png HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\n\r\n", 403, "policy_denied"),
            ("a cross-site fetch", "GET /http/127.0.0.1:\(port)/img/s.png HTTP/1.1\r\nHost: 127.0.0.1\r\nSec-Fetch-Site: cross-site\r\n\r\n", 403, "policy_denied"),
            ("a rebound DNS name (Host)", "GET /http/127.0.0.1:\(port)/img/h.png HTTP/1.1\r\nHost: evil.example:8090\r\n\r\n", 403, "policy_denied"),
            ("no Host over TCP", "GET /http/127.0.0.1:\(port)/img/n.png HTTP/1.0\r\n\r\n", 403, "policy_denied"),
            ("a chosen key over TCP", "GET /image?url=http%3A%2F%2F127.0.0.1%3A\(port)%2Fimg%2Fk.png&key=mine HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, "bad_request"),
            ("an unknown route", "GET /etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404, "not_found"),
        ]
        let before = try await world.daemon.result(#"{"cmd":"status"}"#)
        for item in cases {
            let connection = try RawHTTPConnection(world.address)
            try connection.send(item.request)
            let response = connection.readResponse()
            #expect(response?.status == item.status, "\(item.name): \(response.map { "\($0.status) \($0.headers)" } ?? "closed")")
            if let code = item.code {
                #expect(response?.header("x-imgd-error") == code, "\(item.name): \(response?.headers ?? [:])")
            }
        }
        // Nothing was fetched or cached, and a good request is still served.
        #expect(world.server.totalRequests == 0, "\(world.server.requestLog)")
        let after = try await world.daemon.result(#"{"cmd":"status"}"#)
        #expect((after["cache"] as? [String: Any])?["entries"] as? Int == (before["cache"] as? [String: Any])?["entries"] as? Int)
        let good = try await Self.fetch(world.pathForm("/img/after.png"), scratch: world.scratch)
        #expect(good.status == 200 && good.body == TestHTTPServer.body(for: "/img/after.png"))
        try await world.finish()
    }

    @Test("an https origin with HTTP/2 through the path form: a failure (an untrusted certificate) is a 502 naming tls, then the same URL with the CA trusted is fetched over HTTP/2, byte-exact")
    func httpsOrigin() async throws {
        let certificates = try await TestCertificates.shared()
        let server = try await TestHTTPServer.start(tls: TestHTTPServer.TLS(certificates.valid))
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let target = "/img/h2-face.png?w=30&h=20"
        let url = "/https/127.0.0.1:\(server.port)" + target
        // Without the CA: the origin cannot be verified.
        var port = try freeTCPPort()
        var daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--http-listen", "127.0.0.1:\(port)"])
        let refused = try await Self.fetch("http://127.0.0.1:\(port)" + url, scratch: scratch)
        #expect(refused.status == 502 && refused.headers["x-imgd-error"] == "tls", "\(refused.headers)")
        _ = await daemon.stop()
        // With it: fetched once, over HTTP/2, and the bytes are the origin's.
        port = try freeTCPPort()
        daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--http-listen", "127.0.0.1:\(port)", "--ca-file", certificates.caFile])
        let fetched = try await Self.fetch("http://127.0.0.1:\(port)" + url, scratch: scratch)
        #expect(fetched.status == 200 && fetched.headers["x-imgd-source"] == "network")
        #expect(fetched.body == TestHTTPServer.body(for: target))
        #expect(server.http2Requests == 1, "\(server.requestLog)")
        _ = await daemon.stop()
        try await server.shutdown()
    }

    @Test("an origin's 404 is a 502 naming http_404; nothing is cached")
    func originFailure() async throws {
        let world = try await World.start()
        let missing = try await Self.fetch(world.pathForm("/status/404"), scratch: world.scratch)
        #expect(missing.status == 502 && missing.headers["x-imgd-error"] == "http_404", "\(missing.headers)")
        #expect(missing.headers["cache-control"] == "no-store")
        let html = try await Self.fetch(world.pathForm("/html"), scratch: world.scratch)
        #expect(html.status == 502 && html.headers["x-imgd-error"] == "not_image", "\(html.headers)")
        // A success after the failures.
        let good = try await Self.fetch(world.pathForm("/img/later.png"), scratch: world.scratch)
        #expect(good.status == 200)
        try await world.finish()
    }

    @Test("a head dripped slower than http-header-timeout gets 408 and is closed; an idle connection closes after http-idle-timeout")
    func slowHeadAndIdle() async throws {
        let world = try await World.start(["--http-header-timeout", "1s", "--http-idle-timeout", "2s"])
        let drip = try RawHTTPConnection(world.address)
        let started = ContinuousClock.now
        for byte in Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8) {
            guard (try? drip.send([byte])) != nil else { break }
            try await Task.sleep(for: .milliseconds(100))
            if ContinuousClock.now - started > .seconds(3) { break }
        }
        let answer = RawHTTPConnection.responses(drip.readUntilClosed())
        #expect(answer.first?.status == 408 && answer.first?.header("x-imgd-error") == "request_timeout", "\(answer.map(\.status))")

        // Idle: a request answered, then nothing: the server closes.
        let idle = try RawHTTPConnection(world.address)
        try idle.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(idle.readResponse()?.status == 200)
        #expect(idle.isClosedByServer(within: .seconds(15)))
        try await world.finish()
    }

    @Test("careless configuration: a non-loopback address is refused at start naming http-allow-remote; a host name is refused; allowed when asked")
    func carelessConfiguration() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let port = try freeTCPPort()
        let remote = try await ChildProcess.run(BinaryRunner.imgdPath, ["--http-listen", "0.0.0.0:\(port)"], in: scratch.path, environment: DaemonProcess.environment())
        #expect(remote.status == 1, "\(remote.stdout)\(remote.stderr)")
        #expect((remote.stdout + remote.stderr).contains("http-allow-remote"), "\(remote.stderr)")
        let name = try await ChildProcess.run(BinaryRunner.imgdPath, ["--http-listen", "localhost:\(port)"], in: scratch.path, environment: DaemonProcess.environment())
        #expect(name.status == 2 && (name.stdout + name.stderr).contains("literal IP address"), "\(name.stderr)")
        let allowed = try await DaemonProcess.start(in: scratch.path, arguments: ["--http-listen", "0.0.0.0:\(port)", "--http-allow-remote", "true"])
        let health = try await Self.curl(["-w", "%{http_code}", "-o", "/dev/null", "http://127.0.0.1:\(port)/healthz"])
        #expect(health.stdout == "200")
        _ = await allowed.stop()
    }

    @Test("over http-max-connections, the next connection gets 503 busy with Retry-After; the open ones are still served")
    func connectionCap() async throws {
        let world = try await World.start(["--http-max-connections", "3"])
        var held: [RawHTTPConnection] = []
        for _ in 0..<3 {
            let connection = try RawHTTPConnection(world.address)
            try connection.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            // Answered: admitted (the kernel completes a connect before imgd accepts it).
            #expect(connection.readResponse()?.status == 200)
            held.append(connection)
        }
        let refused = try RawHTTPConnection(world.address)
        let answer = RawHTTPConnection.responses(refused.readUntilClosed())
        #expect(answer.first?.status == 503 && answer.first?.header("x-imgd-error") == "busy" && answer.first?.header("retry-after") == "1")
        try held[0].send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let served = RawHTTPConnection.responses(held[0].readUntilClosed())
        #expect(served.map(\.status) == [200])
        held.removeAll()
        try await world.finish()
    }

    @Test("on the Unix listener, one uid at its per-peer cap gets 503 busy while a second uid still gets in")
    func perPeerCap() async throws {
        guard OtherUser.available else {
            Issue.record("needs root and setpriv to run a client as another uid")
            return
        }
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        chmod(scratch.path, 0o755)
        let socket = scratch.path + "/http.sock"
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--http-listen", "unix:" + socket, "--http-max-connections-per-peer", "2"])
        try OtherUser.share(socket)
        var held: [RawHTTPConnection] = []
        for _ in 0..<2 {
            let connection = try RawHTTPConnection("unix:" + socket)
            try connection.send("GET /healthz HTTP/1.1\r\nHost: imgd\r\n\r\n")
            #expect(connection.readResponse()?.status == 200)
            held.append(connection)
        }
        let third = try RawHTTPConnection("unix:" + socket)
        let refused = third.readResponse()
        #expect(refused?.status == 503 && refused?.header("x-imgd-error") == "busy", "\(refused?.headers ?? [:])")
        let refusal = String(decoding: refused?.body ?? [], as: UTF8.self)
        #expect(refusal.contains("http-max-connections-per-peer"), "\(refusal)")
        // Another uid, a member of the socket's group, is served meanwhile.
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            s.sendall(b"GET /healthz HTTP/1.1\\r\\nHost: imgd\\r\\nConnection: close\\r\\n\\r\\n")
            reply = b""
            while True:
                chunk = s.recv(65536)
                if not chunk: break
                reply += chunk
            sys.stdout.write(reply.decode().split("\\r\\n")[0])
            """
        let other = try await ChildProcess.run(
            OtherUser.setpriv,
            ["--reuid=\(OtherUser.uid)", "--regid=\(OtherUser.gid)", "--clear-groups", "--", "/usr/bin/python3", "-c", script, socket],
            in: "/", environment: ["PATH": "/usr/bin:/bin"])
        #expect(other.stdout == "HTTP/1.1 200 OK", "\(other.stdout) \(other.stderr)")
        held.removeAll()
        _ = await daemon.stop()
    }

    @Test("a chosen key over the Unix socket is the asker's own: a second uid's key=shared does not replace root's")
    func chosenKeyPerUid() async throws {
        guard OtherUser.available else {
            Issue.record("needs root and setpriv to run a client as another uid")
            return
        }
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        chmod(scratch.path, 0o755)
        let socket = scratch.path + "/http.sock"
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--http-listen", "unix:" + socket])
        try OtherUser.share(socket)
        func query(_ target: String, fetch: Bool = true) -> String {
            "/image?url=" + server.url(target).addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&key=shared" + (fetch ? "" : "&fetch=0")
        }
        let mine = "/img/root-own.png?w=11", theirs = "/img/member-own.png?w=13"
        let first = try await Self.fetch("http://imgd" + query(mine), ["--unix-socket", socket], scratch: scratch)
        #expect(first.status == 200 && first.body == TestHTTPServer.body(for: mine))
        let script = """
            import socket, sys, hashlib
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            s.sendall(("GET " + sys.argv[2] + " HTTP/1.1\\r\\nHost: imgd\\r\\nConnection: close\\r\\n\\r\\n").encode())
            reply = b""
            while True:
                chunk = s.recv(65536)
                if not chunk: break
                reply += chunk
            head, _, body = reply.partition(b"\\r\\n\\r\\n")
            sys.stdout.write(head.split(b"\\r\\n")[0].decode() + " " + hashlib.sha256(body).hexdigest())
            """
        let member = try await ChildProcess.run(
            OtherUser.setpriv,
            ["--reuid=\(OtherUser.uid)", "--regid=\(OtherUser.gid)", "--clear-groups", "--", "/usr/bin/python3", "-c", script, socket, query(theirs)],
            in: "/", environment: ["PATH": "/usr/bin:/bin"])
        #expect(member.stdout == "HTTP/1.1 200 OK " + SHA256Digest(of: TestHTTPServer.body(for: theirs) ?? []).hex, "\(member.stdout) \(member.stderr)")
        // Root's keyed entry is still root's bytes, from the cache.
        let again = try await Self.fetch("http://imgd" + query(mine, fetch: false), ["--unix-socket", socket], scratch: scratch)
        #expect(again.status == 200 && again.body == TestHTTPServer.body(for: mine) && again.headers["x-imgd-source"] != "network")
        _ = await daemon.stop()
        try await server.shutdown()
    }

    @Test("Python's http.client: a keep-alive loop, HEAD, and a 405 that leaves the connection usable")
    func pythonClient() async throws {
        let world = try await World.start()
        let targets = (0..<5).map { "/img/py\($0).png?w=\(10 + $0)" }
        let script = """
            import http.client, sys, hashlib
            conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
            out = []
            for path in sys.argv[2:]:
                conn.request("GET", path)
                r = conn.getresponse()
                body = r.read()
                out.append("%d %s %s" % (r.status, r.getheader("X-Imgd-Source"), hashlib.sha256(body).hexdigest()))
            conn.request("HEAD", sys.argv[2])
            r = conn.getresponse(); r.read()
            out.append("HEAD %d %s" % (r.status, r.getheader("Content-Length")))
            conn.request("PUT", sys.argv[2], body=b"")
            r = conn.getresponse(); r.read()
            out.append("PUT %d %s" % (r.status, r.getheader("Allow")))
            conn.request("GET", sys.argv[2])
            r = conn.getresponse(); r.read()
            out.append("AGAIN %d" % r.status)
            print("\\n".join(out))
            """
        let paths = targets.map { "/http/127.0.0.1:\(world.server.port)" + $0 }
        let run = try await ChildProcess.run("/usr/bin/python3", ["-c", script, "\(world.port)"] + paths)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 8, "\(run.stdout) \(run.stderr)")
        for (index, target) in targets.enumerated() where index < lines.count {
            let digest = SHA256Digest(of: TestHTTPServer.body(for: target) ?? []).hex
            #expect(lines[index] == "200 network \(digest)")
        }
        #expect(lines.dropFirst(5).first == "HEAD 200 \((TestHTTPServer.body(for: targets[0]) ?? []).count)")
        #expect(lines.dropFirst(6).first == "PUT 405 GET, HEAD")
        #expect(lines.dropFirst(7).first == "AGAIN 200")
        try await world.finish()
    }

    @Test("/readyz: 503 with status.ready while the hot set warms, 200 once it is cached")
    func readyz() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let list = scratch.path + "/hot.txt"
        try ["/img/hot1.png", "/img/hot2.png?gate=readyz"].map(server.url).joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
        let port = try freeTCPPort()
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--http-listen", "127.0.0.1:\(port)", "--ready-lists", list])
        let cold = try await Self.fetch("http://127.0.0.1:\(port)/readyz", scratch: scratch)
        #expect(cold.status == 503 && cold.headers["content-type"] == "application/json")
        let coldBody = try JSONSerialization.jsonObject(with: Data(cold.body)) as? [String: Any]
        #expect(coldBody?["ready"] as? Bool == false, "\(coldBody ?? [:])")
        server.openGate("readyz")
        let warm = await eventually(timeout: .seconds(30)) {
            (try? await Self.fetch("http://127.0.0.1:\(port)/readyz", scratch: scratch))?.status == 200
        }
        #expect(warm)
        let status = try await daemon.result(#"{"cmd":"status"}"#)
        #expect((status["ready"] as? [String: Any])?["ready"] as? Bool == true)
        _ = await daemon.stop()
        try await server.shutdown()
    }

    @Test("/metrics: the text of imgctl stats --prometheus, passing promtool, with the HTTP face's get latency counted by source")
    func metrics() async throws {
        let world = try await World.start()
        let target = "/img/metered.png"
        #expect(try await Self.fetch(world.pathForm(target), scratch: world.scratch).status == 200)  // network
        #expect(try await Self.fetch(world.pathForm(target), scratch: world.scratch).status == 200)  // disk, then kept in memory
        #expect(try await Self.fetch(world.pathForm(target), scratch: world.scratch).status == 200)  // memory
        #expect(try await Self.fetch(world.pathForm("/status/404"), scratch: world.scratch).status == 502)  // error
        let scraped = try await Self.fetch(world.base + "/metrics", scratch: world.scratch)
        #expect(scraped.status == 200 && scraped.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        let text = String(decoding: scraped.body, as: UTF8.self)
        for source in ["network", "disk", "memory", "error"] {
            let line = text.split(separator: "\n").first {
                $0.hasPrefix("imgd_get_duration_seconds_count{") && $0.contains(#"face="http""#) && $0.contains(#"source="\#(source)""#)
            }
            #expect(line.map { $0.hasSuffix(" 1") } == true, "\(source): \(String(describing: line))")
        }
        let file = world.scratch.path + "/metrics.txt"
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        if FileManager.default.isExecutableFile(atPath: MetricsExpositionTests.promtool) {
            let check = try await ChildProcess.run("/bin/sh", ["-c", "\(MetricsExpositionTests.promtool) check metrics < \(file)"])
            #expect(check.status == 0 && check.stdout.isEmpty && check.stderr.isEmpty, "promtool: \(check.stdout)\(check.stderr)")
        } else {
            Issue.record("promtool is missing (Debian package prometheus): make test installs it")
        }
        try await world.finish()
    }

    @Test("/healthz answers ok while the loops turn")
    func health() async throws {
        let world = try await World.start()
        let health = try await Self.fetch(world.base + "/healthz", scratch: world.scratch)
        #expect(health.status == 200 && String(decoding: health.body, as: UTF8.self) == "ok\n")
        try await world.finish()
    }
}

/// A TCP port on 127.0.0.1 nothing listens on now (the kernel's choice for port 0).
func freeTCPPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = 0
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr)
    let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard bound == 0 else { throw RawHTTPError(message: "bind: errno \(errno)") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return Int(UInt16(bigEndian: addr.sin_port))
}

/// The HTTP face's socket passed by systemd (`systemd-socket-activate`, as `imgd-http.socket`
/// with `FileDescriptorName=http` beside `imgd.socket`'s `control`).
@Suite("HTTP face under socket activation (the real imgd)", .timeLimit(.minutes(5)), .offThePool)
struct HTTPFaceSocketActivationTests {
    static let activate = "/usr/bin/systemd-socket-activate"

    @Test("control and http sockets passed by name: both answer; the face's socket bound to 0.0.0.0 is refused; an http socket without http-listen is refused")
    func namedSockets() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.activate) else {
            Issue.record("systemd-socket-activate is missing")
            return
        }
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let port = try freeTCPPort()
        let control = scratch.path + "/control.sock"
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--http-listen", "127.0.0.1:\(port)"], socket: control,
            launcher: [Self.activate, "-l", control, "-l", "127.0.0.1:\(port)", "--fdname=control:http"])
        let health = try await HTTPFaceTests.curl(["-w", "%{http_code}", "-o", "/dev/null", "http://127.0.0.1:\(port)/healthz"])
        #expect(health.stdout == "200", "\(daemon.log)")
        #expect(daemon.log.contains("http inherited socket"), "\(daemon.log)")
        _ = await daemon.stop()

        // A careless ListenStream=8090 binds every address: refused as a configured 0.0.0.0 is.
        let wide = try freeTCPPort()
        let refused = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--http-listen", "127.0.0.1:\(wide)"], socket: control, waitForSocket: false,
            launcher: [Self.activate, "-l", control, "-l", "0.0.0.0:\(wide)", "--fdname=control:http"], logName: "wide.log")
        // systemd-socket-activate execs imgd on the first connection (once it has bound).
        _ = await eventually(timeout: .seconds(30)) {
            _ = try? await HTTPFaceTests.curl(["-o", "/dev/null", "--max-time", "2", "http://127.0.0.1:\(wide)/healthz"])
            return !refused.isRunning
        }
        #expect(await refused.waitForExit() == 1)
        #expect(refused.log.contains("http-allow-remote"), "\(refused.log)")

        let other = try freeTCPPort()
        let unset = try await DaemonProcess.start(
            in: scratch.path, arguments: [], socket: control, waitForSocket: false,
            launcher: [Self.activate, "-l", control, "-l", "127.0.0.1:\(other)", "--fdname=control:http"], logName: "unset.log")
        _ = await eventually(timeout: .seconds(30)) {
            _ = try? await HTTPFaceTests.curl(["-o", "/dev/null", "--max-time", "2", "http://127.0.0.1:\(other)/healthz"])
            return !unset.isRunning
        }
        #expect(await unset.waitForExit() == 1)
        #expect(unset.log.contains("http-listen is not set"), "\(unset.log)")
    }
}

/// nginx as a resizer in front of imgd, as an image server would be: `proxy_pass` to the face's
/// Unix socket and Debian's `image_filter` module resizing what imgd serves.
@Suite("HTTP face behind nginx's image_filter (the real imgd, the real nginx)", .timeLimit(.minutes(5)), .offThePool)
struct HTTPFaceResizerTests {
    static let module = "/usr/lib/nginx/modules/ngx_http_image_filter_module.so"

    @Test("one PNG resized to three widths: each answer is a PNG of its width, and the origin is asked once")
    func resizer() async throws {
        guard FileManager.default.fileExists(atPath: Self.module), FileManager.default.isExecutableFile(atPath: NginxTier.nginxPath) else {
            Issue.record("nginx's image_filter module is missing (\(Self.module)): make test installs libnginx-mod-http-image-filter")
            return
        }
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // nginx's workers run as nobody: they pass through the folder, and reach the socket
        // through its group, as nginx's user would join group imgd.
        chmod(scratch.path, 0o755)
        let socket = scratch.path + "/http.sock"
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--http-listen", "unix:" + socket])
        #expect(chown(socket, 0, OtherUser.gid) == 0)
        let port = try freeTCPPort()
        let folder = scratch.path + "/nginx"
        try FileManager.default.createDirectory(atPath: folder + "/tmp", withIntermediateDirectories: true)
        chmod(folder, 0o755)
        let config = """
            load_module \(Self.module);
            worker_processes 1;
            pid \(folder)/nginx.pid;
            events { worker_connections 64; }
            http {
                access_log \(folder)/access.log;
                client_body_temp_path \(folder)/tmp/body;
                proxy_temp_path \(folder)/tmp/proxy;
                fastcgi_temp_path \(folder)/tmp/fastcgi;
                uwsgi_temp_path \(folder)/tmp/uwsgi;
                scgi_temp_path \(folder)/tmp/scgi;
                upstream imgd { server unix:\(socket); keepalive 8; }
                server {
                    listen 127.0.0.1:\(port);
                    location ~ ^/w/(\\d+)/(.*)$ {
                        proxy_pass http://imgd/$2$is_args$args;
                        proxy_http_version 1.1;
                        proxy_set_header Connection "";
                        image_filter resize $1 -;
                        image_filter_buffer 8M;
                    }
                }
            }
            """
        try config.write(toFile: folder + "/nginx.conf", atomically: true, encoding: .utf8)
        let nginx = try ChildProcess(
            NginxTier.nginxPath, ["-p", folder, "-e", folder + "/error.log", "-c", folder + "/nginx.conf", "-g", "daemon off;"],
            stdout: .file(folder + "/nginx.out"), stderr: .file(folder + "/nginx.out"))
        defer { nginx.signal(SIGTERM) }
        let up = await eventually(timeout: .seconds(30)) {
            (try? await HTTPFaceTests.curl(["-o", "/dev/null", "http://127.0.0.1:\(port)/"]))?.status == 0 || !nginx.isRunning
        }
        #expect(up && nginx.isRunning)

        let target = "/img/resize-me.png?w=400&h=300"
        for width in [50, 100, 200] {
            let url = "http://127.0.0.1:\(port)/w/\(width)/http/127.0.0.1:\(server.port)" + target
            let answer = try await HTTPFaceTests.fetch(url, scratch: scratch)
            let errors = (try? String(contentsOfFile: folder + "/error.log", encoding: .utf8)) ?? ""
            #expect(answer.status == 200, "\(answer.headers) \(errors) \(daemon.log)")
            #expect(Self.pngWidth(answer.body) == width, "\(answer.body.prefix(24))")
        }
        #expect(server.requestCount(target) == 1, "\(server.requestLog)")
        // Stopped and waited for: a master killed before it has stopped its workers (the
        // child's SIGKILL when the test returns) leaves them running, orphaned.
        nginx.signal(SIGTERM)
        #expect(await nginx.exited(within: .seconds(20)) != nil)
        _ = await daemon.stop()
        try await server.shutdown()
    }

    /// A PNG's width, from its IHDR chunk; nil for anything else.
    static func pngWidth(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 24, bytes[0..<8] == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], bytes[12..<16] == Array("IHDR".utf8)[...] else {
            return nil
        }
        return bytes[16..<20].reduce(0) { $0 << 8 | Int($1) }
    }
}
