import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The downloader's flags as docs/settings.md's table states them, through the real daemon and the
/// test server's request log: `--proxy` (every request to the proxy, in absolute form; the
/// `*_proxy` environment ignored), `--timeout` (one whole attempt) and `--max-body-bytes`
/// (declared or counted as it streams, never retried).
@Suite("imgd: --proxy, --timeout and --max-body-bytes (the real binary)", .timeLimit(.minutes(10)), .offThePool)
struct DaemonDownloadFlagTests {
    @Test("--proxy: requests go to the proxy in absolute form, for a name only it can resolve and for a reachable origin alike; the origin hears nothing")
    func proxy() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { origin in
            try await withRunningServer { proxy in
                let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--proxy", proxy.origin])
                defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
                // `.invalid` never resolves (RFC 6761): fetched at all, it went through the proxy.
                let unresolvable = "http://images.invalid/img/via-proxy.png"
                let got = try await daemon.result(#"{"cmd":"get","url":"\#(unresolvable)"}"#)
                #expect(got["source"] as? String == "network" && got["format"] as? String == "png", "\(got)")
                #expect(proxy.requestLog == [unresolvable], "the proxy saw \(proxy.requestLog)")

                let reachable = origin.url("/img/also-via-proxy.png")
                let again = try await daemon.result(#"{"cmd":"get","url":"\#(reachable)"}"#)
                #expect(again["source"] as? String == "network", "\(again)")
                #expect(proxy.requestLog == [unresolvable, reachable], "the proxy saw \(proxy.requestLog)")
                #expect(origin.totalRequests == 0, "the origin was asked directly: \(origin.requestLog)")
                #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
            }
        }
    }

    @Test("no --proxy: http_proxy, HTTP_PROXY and all_proxy in the environment are ignored; the origin is asked directly")
    func proxyEnvironmentIgnored() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { origin in
            try await withRunningServer { proxy in
                let environment = ["http_proxy": proxy.origin, "HTTP_PROXY": proxy.origin, "all_proxy": proxy.origin, "ALL_PROXY": proxy.origin]
                let daemon = try await DaemonProcess.start(in: scratch.path, environment: environment)
                defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
                let got = try await daemon.result(#"{"cmd":"get","url":"\#(origin.url("/img/direct.png"))"}"#)
                #expect(got["source"] as? String == "network", "\(got)")
                #expect(origin.requestLog == ["/img/direct.png"], "the origin saw \(origin.requestLog)")
                #expect(proxy.totalRequests == 0, "the environment's proxy was used: \(proxy.requestLog)")
                #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
            }
        }
    }

    @Test("--proxy with NO_PROXY/no_proxy in the environment: still every request goes through the proxy (libcurl does not read them)")
    func proxyNoProxyEnvironmentIgnored() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { origin in
            try await withRunningServer { proxy in
                let daemon = try await DaemonProcess.start(
                    in: scratch.path, arguments: ["--proxy", proxy.origin], environment: ["NO_PROXY": "*", "no_proxy": "*"])
                defer { daemon.killIfRunning() }
                let reachable = origin.url("/img/no-proxy-env.png")
                let got = try await daemon.result(#"{"cmd":"get","url":"\#(reachable)"}"#)
                #expect(got["source"] as? String == "network", "\(got)")
                #expect(proxy.requestLog == [reachable], "the proxy saw \(proxy.requestLog)")
                #expect(origin.totalRequests == 0, "NO_PROXY sent the request around the proxy: \(origin.requestLog)")
                #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
            }
        }
    }

    @Test("socks4://, socks:// and socks5:// proxies (resolved on imgd's host, unchecked) are refused at start, by flag or file, naming the scheme to use; nothing is made on disk")
    func locallyResolvingProxyRefused() async throws {
        for (scheme, instead) in [("socks5", "socks5h"), ("socks4", "socks4a"), ("socks", "socks4a")] {
            try await expectConfigurationRefused(
                "max-parallel = 2\nproxy = \"\(scheme)://127.0.0.1:1080\"\n", line: 2, mentions: "use \(instead):// (the proxy resolves host names")
            let scratch = try ScratchFolder()
            defer { scratch.remove() }
            let run = try await BinaryRunner.imgd(["--proxy", "\(scheme)://user:s3cr3t@127.0.0.1:1080"], in: scratch.path, timeout: .seconds(30))
            #expect(run.status == 2, "\(run.stderr)")
            #expect(run.stderr.contains("--proxy") && run.stderr.contains("use \(instead)://"), "\(run.stderr)")
            #expect(!run.stderr.contains("s3cr3t"), "\(run.stderr)")
            #expect(!FileManager.default.fileExists(atPath: scratch.path + "/imgd-data"), "imgd made its folders before refusing")
            let prefetch = try await BinaryRunner.imgd(
                ["prefetch", "list.txt", "--cache", "c", "--proxy", "\(scheme)://127.0.0.1:1080"], in: scratch.path, timeout: .seconds(30))
            #expect(prefetch.status != 0 && prefetch.stderr.contains("use \(instead)://"), "\(prefetch.stderr)")
            #expect(!FileManager.default.fileExists(atPath: scratch.path + "/c"), "imgd prefetch made its cache before refusing")
        }
    }

    @Test("a reload to a socks5:// proxy is refused, saying which scheme to use; the running configuration stays")
    func locallyResolvingProxyRefusedOnReload() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", "max-parallel = 2\n")
        try await withRunningServer { origin in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            try scratch.write("imgd.toml", "max-parallel = 3\nproxy = \"socks5://127.0.0.1:1080\"\n")
            kill(daemon.pid, SIGHUP)
            #expect(
                await eventually(timeout: .seconds(10)) {
                    daemon.log.contains("reload failed, keeping the running configuration") && daemon.log.contains("use socks5h://")
                }, "\(daemon.log)")
            #expect(!daemon.log.contains("reloaded: max-parallel"), "\(daemon.log)")
            let got = try await daemon.result(#"{"cmd":"get","url":"\#(origin.url("/img/after-reload.png"))"}"#)
            #expect(got["source"] as? String == "network", "\(got)")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    @Test("--timeout 2s bounds one whole attempt: a head 20 s late and a body that takes 10 s both fail as timeout, one request each; a prompt image passes")
    func timeout() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--timeout", "2s", "--attempts", "1"])
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            // Both would succeed under the default 120 s: the head comes before the 10 s connect
            // limit matters, and the body flows at 2 KB/s, above the 1 KiB/s stall rule, with no
            // declared length for the pace rule to judge.
            let lateHead = "/img/late-head.png?delay_ms=20000"
            let slowBody = "/img/slow-body.png?bytes=20000&slow_bps=2000&no_cl=1"
            for target in [lateHead, slowBody] {
                let reply = try await daemon.call(#"{"cmd":"get","url":"\#(server.url(target))"}"#)
                #expect(ControlReply.errorCode(reply) == "timeout", "\(target): \(reply)")
                #expect(server.requestCount(target) == 1, "\(target) was asked \(server.requestCount(target)) times")
            }
            let prompt = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/prompt.png?delay_ms=100"))"}"#)
            #expect(prompt["source"] as? String == "network", "\(prompt)")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    @Test("--max-body-bytes 100KiB: a larger body is too_large whether declared, close-delimited or chunked, asked once each (never retried); a smaller one passes")
    func maxBodyBytes() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            // The default of 3 attempts: a refusal for size must not be tried again.
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-body-bytes", "100KiB"])
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let large = ["/img/declared.png?bytes=200000", "/img/undeclared.png?bytes=200000&no_cl=1", "/img/chunked.png?bytes=200000&chunked=1"]
            for target in large {
                let reply = try await daemon.call(#"{"cmd":"get","url":"\#(server.url(target))"}"#)
                #expect(ControlReply.errorCode(reply) == "too_large", "\(target): \(reply)")
                #expect(server.requestCount(target) == 1, "\(target) was asked \(server.requestCount(target)) times")
            }
            let small = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/small.png?bytes=60000&no_cl=1"))"}"#)
            #expect((small["bytes"] as? Int ?? 0) > 50_000, "\(small)")
            let stats = try await daemon.result(#"{"cmd":"stats"}"#)
            #expect((stats["failures"] as? [String: Any])?["too_large"] as? Int == 3, "\(stats)")
            #expect(scratch.files(under: "imgd-data/cache").count == 1, "\(scratch.files(under: "imgd-data/cache"))")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }
}
