import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The address policy proved where it matters: the real `imgd prefetch`, in a network namespace of
/// its own where the metadata addresses are local and something listens on them. Outside such a
/// namespace nothing could listen there, and a refusal would look the same as a host that does
/// not answer.
///
/// The namespace runs `unshare -n -m`: a loopback-only network with 169.254.169.254 and
/// fd00:ec2::254 added to `lo`, and an `/etc/hosts` of its own (bind-mounted, in the private mount
/// namespace) that names 169.254.169.254 `metadata.imgd.test`. A Python script there listens,
/// proves each listener reachable with one connection of its own, runs imgd directly and through a
/// "proxy" (one more listener), then counts, without accepting anything in between, the
/// connections each listener had queued.
@Suite("Address policy in a network namespace (the binary)", .timeLimit(.minutes(10)), .offThePool)
struct AddressPolicyNamespaceTests {
    /// The URLs refused with or without a proxy: their host is a literal address.
    /// Each names a file of its own, so that its line in the report can be found whatever form
    /// the URL is shown in.
    static let literalURLs = [
        "http://169.254.169.254/latest/meta-data/iam1.png",
        "https://169.254.169.254/latest/meta-data/iam2.png",
        "http://[fd00:ec2::254]/latest/meta-data/iam3.png",
        "http://[::ffff:169.254.169.254]/latest/meta-data/iam4.png",
        "http://2852039166/latest/meta-data/iam5.png",
    ]
    /// Refused without a proxy, when the socket is opened: a name is resolved first.
    static let namedURL = "http://metadata.imgd.test/latest/meta-data/iam6.png"

    /// Whether this process may make the namespace (root, `unshare`, `ip`, `python3`), checked by
    /// doing it.
    static func namespaceWorks() async -> Bool {
        guard getuid() == 0 else { return false }
        let probe = try? await ChildProcess.run(
            "/usr/bin/unshare",
            ["-n", "-m", "sh", "-c", "ip link set lo up && ip addr add 169.254.169.254/32 dev lo && python3 -c 'import socket'"],
            timeout: .seconds(30))
        return probe?.status == 0
    }

    @Test(
        "imgd refuses the metadata endpoints, directly and through a proxy; no listener sees a connection",
        .enabled("needs root, unshare -n -m, ip and python3 to make a network namespace") { await namespaceWorks() })
    func namespace() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("literal.txt", Self.literalURLs.joined(separator: "\n") + "\n")
        try scratch.write("all.txt", (Self.literalURLs + [Self.namedURL]).joined(separator: "\n") + "\n")
        try scratch.write("hosts", "127.0.0.1 localhost\n169.254.169.254 metadata.imgd.test\n")
        try scratch.write("inside.py", Self.insideScript)
        let setup = [
            "set -e",
            "ip link set lo up",
            "ip addr add 169.254.169.254/32 dev lo",
            "ip addr add fd00:ec2::254/128 dev lo nodad",
            "mount --bind hosts /etc/hosts",
            "exec python3 inside.py \"$0\"",
        ].joined(separator: "\n")
        let run = try await ChildProcess.run(
            "/usr/bin/unshare", ["-n", "-m", "sh", "-c", setup, BinaryRunner.imgdPath], in: scratch.path,
            timeout: .seconds(120))
        try #require(run.status == 0, "the namespace script failed (\(run.status)):\n\(run.stderr)\n\(run.stdout)")
        let report = try JSONDecoder().decode(Report.self, from: Data(run.stdout.utf8))

        // Each listener was reachable from inside: one connection, the script's own.
        #expect(report.control == ["metadata": 1, "metadata-tls": 1, "metadata6": 1, "proxy": 1])
        // Then imgd, directly (a name and the literal addresses) and through the proxy (the
        // literal addresses; a name would be the proxy's to resolve): not one more connection.
        #expect(report.after == report.control, "connections after imgd ran: \(report.after)")

        for (name, result, urls) in [("direct", report.direct, Self.literalURLs + [Self.namedURL]), ("proxied", report.proxied, Self.literalURLs)] {
            #expect(result.status == 1, "\(name): exit \(result.status)\n\(result.stderr)")
            for url in urls {
                let file = String(url.split(separator: "/").last!)
                let line = result.stderr.split(separator: "\n").first { $0.contains("failed: ") && $0.contains("/" + file + ": policy_denied: ") }
                #expect(line != nil, "\(name): no policy_denied line for \(url) in:\n\(result.stderr)")
            }
            #expect(result.stdout.contains("\(urls.count) failed (policy_denied \(urls.count))"), "\(name):\n\(result.stdout)")
        }
        let named = report.direct.stderr.split(separator: "\n").first { $0.contains(Self.namedURL) }
        #expect(named?.contains("connecting to 169.254.169.254 is refused") == true, "the name is refused at connect time: \(String(describing: named))")
    }

    /// What the script prints.
    struct Report: Decodable {
        struct Run: Decodable {
            let status: Int
            let stdout: String
            let stderr: String
        }
        let control: [String: Int]
        let after: [String: Int]
        let direct: Run
        let proxied: Run
    }

    /// Runs inside the namespace with the imgd binary's path as its argument. Listeners accept
    /// nothing while imgd runs: a connection imgd made would wait in the backlog, to be counted
    /// after, and a request imgd sent would get no answer (imgd's 5 s timeout ends it).
    static let insideScript = #"""
        import json, socket, subprocess, sys, time

        imgd = sys.argv[1]
        listeners = {}
        def listen(name, family, address):
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(address)
            s.listen(64)
            s.setblocking(False)
            listeners[name] = [s, 0]
            return s.getsockname()[1]

        listen("metadata", socket.AF_INET, ("169.254.169.254", 80))
        listen("metadata-tls", socket.AF_INET, ("169.254.169.254", 443))
        listen("metadata6", socket.AF_INET6, ("fd00:ec2::254", 80))
        proxy_port = listen("proxy", socket.AF_INET, ("127.0.0.1", 0))

        def count(deadline_after=0.0, expect=None):
            # Accepts what is queued; when `expect` is given, polls until each count is reached
            # or the deadline passes (a connection can be queued a moment after connect returns).
            deadline = time.monotonic() + deadline_after
            while True:
                for entry in listeners.values():
                    while True:
                        try:
                            c, _ = entry[0].accept()
                        except BlockingIOError:
                            break
                        c.close()
                        entry[1] += 1
                counts = {name: entry[1] for name, entry in listeners.items()}
                if expect is None or all(counts[k] >= v for k, v in expect.items()) or time.monotonic() > deadline:
                    return counts
                time.sleep(0.01)

        for address, family in [(("169.254.169.254", 80), socket.AF_INET), (("169.254.169.254", 443), socket.AF_INET),
                                (("fd00:ec2::254", 80), socket.AF_INET6), (("127.0.0.1", proxy_port), socket.AF_INET)]:
            c = socket.socket(family, socket.SOCK_STREAM)
            c.connect(address)
            c.close()
        control = count(5.0, {name: 1 for name in listeners})

        def prefetch(listfile, cache, *extra):
            run = subprocess.run([imgd, "prefetch", listfile, "--cache", cache, "--timeout", "5", *extra],
                                 capture_output=True, text=True, timeout=60)
            return {"status": run.returncode, "stdout": run.stdout, "stderr": run.stderr}

        direct = prefetch("all.txt", "c-direct")
        proxied = prefetch("literal.txt", "c-proxied", "--proxy", "http://127.0.0.1:%d" % proxy_port)
        after = count()
        print(json.dumps({"control": control, "after": after, "direct": direct, "proxied": proxied}))
        """#
}
