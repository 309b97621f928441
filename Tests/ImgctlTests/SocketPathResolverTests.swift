import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgctlCLI

#if canImport(Glibc)
import Glibc
#endif

@Suite("Socket path resolution and unreachable daemons", .offThePool)
struct SocketPathResolverTests {
    @Test("order: --socket, IMGD_SOCKET, ./imgd-data/imgd.sock if present, /run/imgd/imgd.sock")
    func order() {
        let environment = ["IMGD_SOCKET": "/env.sock"]
        #expect(SocketPathResolver.resolve(flag: "/flag.sock", environment: environment, exists: { _ in true }) == "/flag.sock")
        #expect(SocketPathResolver.resolve(flag: nil, environment: environment, exists: { _ in true }) == "/env.sock")
        var asked: [String] = []
        let embedded = SocketPathResolver.resolve(flag: nil, environment: [:]) { path in
            asked.append(path)
            return true
        }
        #expect(embedded == "./imgd-data/imgd.sock")
        #expect(asked == ["./imgd-data/imgd.sock"])
        #expect(SocketPathResolver.resolve(flag: nil, environment: [:], exists: { _ in false }) == "/run/imgd/imgd.sock")
        // An empty variable is as good as none.
        #expect(SocketPathResolver.resolve(flag: nil, environment: ["IMGD_SOCKET": ""], exists: { _ in false }) == "/run/imgd/imgd.sock")
    }

    @Test("nothing at the path: exit 3, the message names the socket tried")
    func missingSocket() throws {
        let scratch = try ScratchFolder("imgctl-test")
        defer { scratch.remove() }
        let folder = scratch.path
        let path = folder + "/none.sock"
        let run = ImgctlRun(["status", "--socket", path])
        #expect(run.status == 3)
        #expect(
            run.stderr.text
                == "imgctl: cannot reach imgd at \(path): No such file or directory (is imgd running? set --socket or IMGD_SOCKET)\n")
        #expect(run.stdout.text.isEmpty)
        // The same through the environment, and for the fallback.
        let fromEnvironment = ImgctlRun(["lists"], environment: ["IMGD_SOCKET": path])
        #expect(fromEnvironment.status == 3)
        #expect(fromEnvironment.stderr.text.contains("cannot reach imgd at \(path): "))
        let fallback = ImgctlRun(["stats"], configure: { $0.fileExists = { _ in false } })
        if !ImgctlContext.lstatExists("/run/imgd/imgd.sock") {
            #expect(fallback.status == 3)
            #expect(fallback.stderr.text.contains("cannot reach imgd at /run/imgd/imgd.sock: "))
        }
    }

    @Test("a socket file nobody listens on: exit 3, connection refused")
    func refused() throws {
        let scratch = try ScratchFolder("imgctl-test")
        defer { scratch.remove() }
        let folder = scratch.path
        let path = folder + "/stale.sock"
        // Bound but never listening: what a crashed daemon leaves behind.
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        try #require((try? UnixSocketAddress(path: path))?.withSockaddr { bind(descriptor, $0, $1) } == 0)
        let run = ImgctlRun(["status", "--socket", path])
        #expect(run.status == 3)
        #expect(run.stderr.text.contains("cannot reach imgd at \(path): Connection refused"))
    }

    @Test("a path too long for a socket address: exit 3 with the reason")
    func tooLong() {
        let path = "/tmp/" + String(repeating: "x", count: 200) + ".sock"
        let run = ImgctlRun(["status", "--socket", path])
        #expect(run.status == 3)
        #expect(run.stderr.text.contains("longer than a socket address allows"))
    }
}
