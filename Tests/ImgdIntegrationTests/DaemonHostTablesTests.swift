import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// `[host."PATTERN"]` tables: headers (also from a `headers-file`), per-host caps and request
/// rates, against the real imgd and the test server.
@Suite("imgd: per-host settings and request headers (the real binary)", .timeLimit(.minutes(5)), .offThePool)
struct DaemonHostTablesTests {
    private static let token = "Bearer s3cr3t-t0ken-9f2c"

    @Test("a host's headers go to that host only: a redirect to another host drops them all; the token is never logged, nor in status or stats")
    func headersStayWithTheirHost() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            // Plain http to the test server's port: the table names the port and allows http.
            try scratch.write("imgd.toml", """
                [host."127.0.0.1:\(server.port)"]
                headers = { Authorization = "\(Self.token)", Referer = "https://shop.example/", User-Agent = "fleet-warmer/2" }
                headers-over-http = true
                """)
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/h1.png"))"}"#)
            let direct = try #require(server.requests.first { $0.target == "/img/h1.png" })
            #expect(direct.values(of: "Authorization") == [Self.token])
            #expect(direct.values(of: "Referer") == ["https://shop.example/"])
            #expect(direct.values(of: "User-Agent") == ["fleet-warmer/2"])

            // 127.0.0.1 redirects to localhost (the same server, another host): nothing follows.
            let elsewhere = "http://localhost:\(server.port)/img/h2.png"
            let hop = server.url("/redirect?to=" + elsewhere.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(hop)"}"#)
            let first = try #require(server.requests.first { $0.target.hasPrefix("/redirect") })
            #expect(first.values(of: "Authorization") == [Self.token])
            let second = try #require(server.requests.first { $0.target == "/img/h2.png" })
            #expect(second.values(of: "Authorization").isEmpty)
            #expect(second.values(of: "Referer").isEmpty)
            #expect(second.values(of: "User-Agent").first?.hasPrefix("imgd/") == true, "\(second.headers)")

            let status = try await daemon.call(#"{"cmd":"status"}"#)
            let stats = try await daemon.call(#"{"cmd":"stats"}"#)
            #expect(!"\(status)\(stats)".contains("s3cr3t"))
            try scratch.write(
                "imgd.toml", "[host.\"127.0.0.1:\(server.port)\"]\nheaders = { Authorization = \"Bearer other-s3cr3t\" }\nheaders-over-http = true\n")
            kill(daemon.pid, SIGHUP)
            #expect(
                await eventually(timeout: .seconds(10)) {
                    daemon.log.contains("reloaded: host tables = 127.0.0.1:\(server.port) (headers: Authorization; headers-over-http: true)")
                }, "\(daemon.log)")
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/h3.png"))"}"#)
            let reloaded = try #require(server.requests.first { $0.target == "/img/h3.png" })
            #expect(reloaded.values(of: "Authorization") == ["Bearer other-s3cr3t"])
            #expect(reloaded.values(of: "Referer").isEmpty)
            #expect(await daemon.stop() == 0)
            #expect(!daemon.log.contains("s3cr3t"), "\(daemon.log)")
        }
    }

    @Test("over https with HTTP/2: the host's headers reach it on every stream of a multiplexed list")
    func headersOverHTTP2() async throws {
        let certificates = try await TestCertificates.shared()
        let server = try await TestHTTPServer.start(tls: TestHTTPServer.TLS(certificates.valid))
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // https to the server's port: the table names it (without one, only 443 would get them).
        try scratch.write("imgd.toml", "[host.\"127.0.0.1:\(server.port)\"]\nheaders = { Authorization = \"\(Self.token)\" }\n")
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml", "--ca-file", certificates.caFile])
        defer { daemon.killIfRunning() }
        let targets = (0..<20).map { "/img/t\($0).png" }
        try daemon.drop("h2.txt", targets.map(server.url).joined(separator: "\n") + "\n")
        let list = try #require(await daemon.finishedList("h2.txt"), "log: \(daemon.log)")
        #expect(list["cached"] as? Int == 20, "\(list)")
        #expect(server.http2Requests == 20)
        let sent = server.requests.filter { $0.target.hasPrefix("/img/t") }
        #expect(sent.count == 20)
        #expect(sent.allSatisfy { $0.values(of: "authorization") == [Self.token] }, "\(sent.map(\.headers))")
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("headers go over https to the port their table names (443 without one), over http only with headers-over-http, to no other port; a redirect's hop is judged afresh, and an https → http hop carries none")
    func headersBoundToSchemeAndPort() async throws {
        let certificates = try await TestCertificates.shared()
        let secure = try await TestHTTPServer.start(tls: TestHTTPServer.TLS(certificates.valid))
        let otherPort = try await TestHTTPServer.start(tls: TestHTTPServer.TLS(certificates.valid))
        let plain = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // 127.0.0.1 without a port: its headers are for https on 443 only, so none of these
        // servers may see X-Unported. localhost:PLAIN allows plain http; 127.0.0.1:PLAIN does not.
        try scratch.write("imgd.toml", """
            [host."127.0.0.1"]
            headers = { X-Unported = "u" }
            [host."127.0.0.1:\(secure.port)"]
            headers = { Authorization = "\(Self.token)" }
            [host."127.0.0.1:\(plain.port)"]
            headers = { X-Not-Plain = "n" }
            [host."localhost:\(plain.port)"]
            headers = { X-Plain = "p" }
            headers-over-http = true
            """)
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml", "--ca-file", certificates.caFile])
        defer { daemon.killIfRunning() }
        func get(_ url: String) async throws {
            let got = try await daemon.result(#"{"cmd":"get","url":"\#(url)"}"#)
            #expect(got["source"] as? String == "network", "\(url): \(got)")
        }
        func sent(_ server: TestHTTPServer, _ target: String) throws -> [String] {
            let request = try #require(server.requests.first { $0.target == target || $0.target.hasPrefix(target + "?") }, "\(target) never arrived")
            return request.headers.map(\.name).map { $0.lowercased() }.filter { ["authorization", "x-unported", "x-plain", "x-not-plain"].contains($0) }.sorted()
        }
        func redirect(_ to: String) -> String {
            secure.url("/redirect?to=" + to.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        }

        try await get(secure.url("/img/https-its-port.png"))
        #expect(try sent(secure, "/img/https-its-port.png") == ["authorization"])
        #expect(try #require(secure.requests.first { $0.target == "/img/https-its-port.png" }).values(of: "Authorization") == [Self.token])
        try await get(otherPort.url("/img/https-other-port.png"))
        #expect(try sent(otherPort, "/img/https-other-port.png") == [], "another port of the host got headers")
        try await get(plain.url("/img/http-not-allowed.png"))
        #expect(try sent(plain, "/img/http-not-allowed.png") == [], "plain http got headers without headers-over-http")
        try await get("http://localhost:\(plain.port)/img/http-allowed.png")
        #expect(try sent(plain, "/img/http-allowed.png") == ["x-plain"])

        // https → http of the same host: the hop is judged as its own request, and drops them.
        try await get(redirect("http://127.0.0.1:\(plain.port)/img/downgraded.png"))
        #expect(try sent(secure, "/redirect") == ["authorization"])
        #expect(try sent(plain, "/img/downgraded.png") == [], "the downgrade carried headers")
        // https → https on another port of the same host: dropped too.
        try await get(redirect("https://127.0.0.1:\(otherPort.port)/img/other-port-hop.png"))
        #expect(try sent(otherPort, "/img/other-port-hop.png") == [])
        // A downgrade carries none even where the hop's own table allows plain http: the origin
        // that redirected chose clear text, not the configuration.
        try await get(redirect("http://localhost:\(plain.port)/img/allowed-hop.png"))
        #expect(try sent(plain, "/img/allowed-hop.png") == [], "a downgrade carried the hop's headers")
        // A hop from http to http where its own table allows it gets that table's headers, and
        // only those.
        let plainRedirect = plain.url("/redirect?to=" + "http://localhost:\(plain.port)/img/plain-hop.png".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        try await get(plainRedirect)
        #expect(try sent(plain, "/img/plain-hop.png") == ["x-plain"])

        #expect(await daemon.stop() == 0)
        #expect(!daemon.log.contains("s3cr3t"), "\(daemon.log)")
        try await secure.shutdown()
        try await otherPort.shutdown()
        try await plain.shutdown()
    }

    @Test("a table without a port and without headers-over-http sends nothing over plain http, even to its host")
    func unportedTableNotOverHTTP() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", "[host.\"127.0.0.1\"]\nheaders = { Authorization = \"\(Self.token)\" }\n")
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/clear.png"))"}"#)
            let request = try #require(server.requests.first { $0.target == "/img/clear.png" })
            #expect(request.values(of: "Authorization").isEmpty, "a token went over plain http")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("headers-file: refused unless only imgd's user may read it; its tables lay over the file's; an edit reloads")
    func headersFile() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let secrets = scratch.path + "/secrets.toml"
        try await withRunningServer { server in
            // Plain http to the test server's port: the table names the port and allows http.
            let host = "127.0.0.1:\(server.port)"
            try scratch.write("imgd.toml", """
                headers-file = "\(secrets)"
                [host."\(host)"]
                headers = { Referer = "https://shop.example/" }
                headers-over-http = true
                """)
            try scratch.write("secrets.toml", "[host.\"\(host)\"]\nheaders = { Authorization = \"\(Self.token)\" }\n")
            #expect(chmod(secrets, 0o644) == 0)
            let refused = try await BinaryRunner.imgd(["--config", scratch.path + "/imgd.toml"], in: scratch.path)
            #expect(refused.status == 2)
            #expect(refused.stderr.contains("is open to group or others (mode 644) but may hold secrets: chmod 600 it"), "\(refused.stderr)")
            #expect(!refused.stderr.contains("s3cr3t"))
            if geteuid() == 0 {
                // Root may give it away: owned by another user, it is refused too.
                #expect(chmod(secrets, 0o600) == 0 && chown(secrets, 65534, 65534) == 0)
                let foreign = try await BinaryRunner.imgd(["--config", scratch.path + "/imgd.toml"], in: scratch.path)
                #expect(foreign.status == 2)
                #expect(foreign.stderr.contains("is owned by uid 65534, not by imgd's user (uid 0): chown it"), "\(foreign.stderr)")
                #expect(chown(secrets, 0, 0) == 0)
            }
            #expect(chmod(secrets, 0o600) == 0)
            do {
                let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
                defer { daemon.killIfRunning() }
                _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/f1.png"))"}"#)
                let request = try #require(server.requests.first { $0.target == "/img/f1.png" })
                #expect(request.values(of: "Authorization") == [Self.token])
                #expect(request.values(of: "Referer") == ["https://shop.example/"])

                // Something that is not a host table in the headers file: the reload is refused and
                // the running headers stay.
                try scratch.write("secrets.toml", "max-parallel = 2\n")
                #expect(chmod(secrets, 0o600) == 0)
                kill(daemon.pid, SIGHUP)
                #expect(await eventually(timeout: .seconds(10)) { daemon.log.contains("a headers-file holds only [host.\"PATTERN\"] tables, not max-parallel") }, "\(daemon.log)")
                _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/f2.png"))"}"#)
                #expect(server.requests.first { $0.target == "/img/f2.png" }?.values(of: "Authorization") == [Self.token])

                // Rewritten as another file (mode 644 by default): the reload is refused, saying why.
                try scratch.write("secrets.toml", "[host.\"\(host)\"]\nheaders = { Authorization = \"Bearer n3w\" }\n")
                kill(daemon.pid, SIGHUP)
                #expect(await eventually(timeout: .seconds(10)) { daemon.log.contains("reload failed, keeping the running configuration") && daemon.log.contains("chmod 600 it") }, "\(daemon.log)")
                #expect(chmod(secrets, 0o600) == 0)
                kill(daemon.pid, SIGHUP)
                #expect(await eventually(timeout: .seconds(10)) { daemon.log.contains("reloaded: host tables") }, "\(daemon.log)")
                _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/f3.png"))"}"#)
                let after = try #require(server.requests.first { $0.target == "/img/f3.png" })
                #expect(after.values(of: "Authorization") == ["Bearer n3w"])
                #expect(after.values(of: "Referer") == ["https://shop.example/"])
                #expect(await daemon.stop() == 0)
                #expect(!daemon.log.contains("s3cr3t") && !daemon.log.contains("n3w"), "\(daemon.log)")
            }
        }
    }

    @Test("an unquoted token in the headers-file: refused at start and at reload naming the file, line and key, never the token")
    func unquotedTokenNeverQuoted() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let secrets = scratch.path + "/secrets.toml"
        try scratch.write("imgd.toml", "headers-file = \"\(secrets)\"\n")
        try scratch.write("secrets.toml", "[host.\"127.0.0.1\".headers]\nX-Api-Key = sk_live_abc123\n")
        #expect(chmod(secrets, 0o600) == 0)
        let refused = try await BinaryRunner.imgd(["--config", scratch.path + "/imgd.toml"], in: scratch.path)
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.contains("secrets.toml:2: host.\"127.0.0.1\".headers.X-Api-Key: not a value"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("sk_live_abc123"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/imgd-data"), "imgd made its folders before refusing")

        try scratch.write("secrets.toml", "[host.\"127.0.0.1\".headers]\nX-Api-Key = \"sk_live_abc123\"\n")
        #expect(chmod(secrets, 0o600) == 0)
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
        defer { daemon.killIfRunning() }
        try scratch.write("secrets.toml", "[host.\"127.0.0.1\"]\nheaders = { X-Api-Key = sk_live_def456 }\n")
        #expect(chmod(secrets, 0o600) == 0)
        kill(daemon.pid, SIGHUP)
        #expect(
            await eventually(timeout: .seconds(10)) {
                daemon.log.contains("reload failed, keeping the running configuration") && daemon.log.contains("secrets.toml:2: host.\"127.0.0.1\".headers.X-Api-Key: not a value")
            }, "\(daemon.log)")
        #expect(await daemon.stop() == 0)
        #expect(!daemon.log.contains("sk_live_"), "\(daemon.log)")
    }

    @Test("max-per-host in a table caps that host only; rate spaces its requests at least one interval apart")
    func capAndRate() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", """
            max-per-host = 4
            [host."127.0.0.1"]
            max-per-host = 1
            [host."localhost"]
            rate = "4/s"
            """)
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/warm.png"))"}"#)
            let held = (0..<3).map { server.url("/img/c\($0).png?gate=capped") }
            _ = try await daemon.result(#"{"cmd":"add","urls":\#(DaemonServiceTests.jsonArray(held))}"#)
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)))
            #expect(!(await eventually(timeout: .milliseconds(500)) { server.inFlight > 1 }), "\(server.inFlight) at once with max-per-host 1")
            server.openGate("capped")
            #expect(await server.waitForRequests(atLeast: 4, timeout: .seconds(10)))
            #expect(server.maxInFlight == 1)

            // localhost: 4 requests a second, a burst of one: 5 requests span at least a second.
            let clock = ContinuousClock()
            let before = server.requestCount(prefix: "/img/r")
            let urls = (0..<5).map { "http://localhost:\(server.port)/img/r\($0).png" }
            let start = clock.now
            _ = try await daemon.result(#"{"cmd":"add","urls":\#(DaemonServiceTests.jsonArray(urls))}"#)
            #expect(await eventually(timeout: .seconds(20)) { server.requestCount(prefix: "/img/r") == before + 5 })
            #expect(clock.now - start >= .milliseconds(950), "5 requests at 4/s took \(clock.now - start)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("bad host tables: a header imgd sets itself, a bad header name or value, a bad rate or cap: exit 2 naming the file and line, never the value")
    func badTables() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        for (text, expected) in [
            ("[host.\"a.example\"]\nheaders = { Host = \"b.example\" }\n", "imgd.toml:2: [host.\"a.example\"] headers: header Host is set by imgd or libcurl"),
            ("[host.\"a.example\"]\nheaders = { \"Bad Name\" = \"x\" }\n", "header Bad Name is not an HTTP header name"),
            ("[host.\"a.example\"]\nheaders = { X-Token = \"s3cr3t\\r\\nEvil: 1\" }\n", "header X-Token has a value holding a line break"),
            ("[host.\"a.example\"]\nheaders = { X-Token = 5 }\n", "the value of X-Token must be a string"),
            ("[host.\"a.example\"]\nrate = \"fast\"\n", "imgd.toml:2: [host.\"a.example\"] rate: 'fast' is not a rate such as 50/s"),
            ("[host.\"a.example\"]\nrate = \"0/s\"\n", "is not a rate"),
            ("[host.\"a.example\"]\nmax-per-host = 0\n", "imgd.toml:2: [host.\"a.example\"] max-per-host: expected an integer from 1 to 1024"),
            ("[host.\"a.example\"]\n[host.\"A.EXAMPLE\"]\n", "a second table for a.example"),
        ] {
            try scratch.write("imgd.toml", text)
            let run = try await BinaryRunner.imgd(["--config", scratch.path + "/imgd.toml"], in: scratch.path)
            #expect(run.status == 2, "\(text): \(run.stderr)")
            #expect(run.stderr.contains(expected), "\(text): \(run.stderr)")
            #expect(!run.stderr.contains("s3cr3t"), "\(run.stderr)")
        }
    }
}
