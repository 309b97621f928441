import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The shared tier of `contrib/fleet/` run for a test: `tier-smoke.sh --render` writes the
/// configuration (nginx-tier.conf on 127.0.0.1 with a free port, its cache in the tier's own
/// folder, trusting the given CA, 127.0.0.1 allowed as a target), and nginx runs it in the
/// foreground as this process's child — never as the system's service.
///
/// Its access log has one line per request, `<request-uri> <status> cache=<cache status>`.
public final class NginxTier: Sendable {
    /// The nginx binary (Debian's package).
    public static let nginxPath = "/usr/sbin/nginx"
    /// The renderer in the repository (found from this file's path).
    public static let renderScript: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path + "/contrib/fleet/tier-smoke.sh"
    }()

    /// Why a test that needs the tier cannot run, or nil when it can.
    public static var unavailableReason: String? {
        if !FileManager.default.isExecutableFile(atPath: nginxPath) {
            return "nginx is not installed (\(nginxPath)); `make test` installs it"
        }
        if !FileManager.default.fileExists(atPath: renderScript) { return "\(renderScript) is missing" }
        return nil
    }

    /// The tier's folder (configuration, cache, logs).
    public let folder: String
    public let port: Int
    private let process: ChildProcess

    /// `http://127.0.0.1:PORT`: what imgd's `tier` setting names.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Renders a tier trusting `caFile` for https origins and starts it; returns once it accepts
    /// connections. `http` is added to the http context before the tier's file: say, an
    /// `upstream NAME { server ADDRESS; }` that stands for a DNS answer (nginx takes a URL's host
    /// that names an upstream block instead of resolving it), so a test can have a name "resolve"
    /// to an address the deny list refuses without a DNS server.
    public static func start(caFile: String, http: String? = nil) async throws -> NginxTier {
        // The workers run as nobody when the test runs as root: every folder above the tier's
        // must let them through.
        let folder = try ScratchFolder("imgd-tier").path
        chmod(folder, 0o755)
        let port = try freePort()
        let rendered = try await ChildProcess.run("/bin/bash", [renderScript, "--render", folder, "\(port)", caFile])
        guard rendered.status == 0 else {
            throw Failure(step: "tier-smoke.sh --render", output: rendered.stdout + rendered.stderr)
        }
        if let http {
            let main = folder + "/nginx.conf"
            let include = "    include \(folder)/imgd-tier.conf;"
            let text = try String(contentsOfFile: main, encoding: .utf8)
            guard text.contains(include) else { throw Failure(step: "adding to nginx.conf", output: text) }
            try text.replacingOccurrences(of: include, with: http + "\n" + include).write(toFile: main, atomically: true, encoding: .utf8)
        }
        let log = folder + "/nginx.out"
        let process = try ChildProcess(
            nginxPath, ["-p", folder, "-e", folder + "/error.log", "-c", folder + "/nginx.conf", "-g", "daemon off;"],
            stdout: .file(log), stderr: .file(log))
        let tier = NginxTier(folder: folder, port: port, process: process)
        let up = await eventually(timeout: .seconds(30)) { !process.isRunning || canConnect(port: port) }
        guard up, process.isRunning else {
            await tier.stop()
            throw Failure(step: "nginx", output: tier.errors)
        }
        return tier
    }

    private init(folder: String, port: Int, process: ChildProcess) {
        self.folder = folder
        self.port = port
        self.process = process
    }

    /// The access log's lines so far.
    public var accessLog: [String] {
        ((try? String(contentsOfFile: folder + "/access.log", encoding: .utf8)) ?? "")
            .split(separator: "\n").map(String.init)
    }

    /// The access log's lines that satisfy `matching`, read once there are at least `count` of
    /// them or `timeout` has passed.
    ///
    /// nginx writes a request's line in its log phase, after the response has gone out, so a
    /// client holding its reply may read the log before the line is there: a plain read races
    /// nginx. Wait for the lines a test knows must come, then assert on what is there: a missing
    /// line fails after the deadline; an extra one shows only if nginx has logged it by then.
    public func logged(atLeast count: Int, timeout: Duration = .seconds(10), where matching: (String) -> Bool) async -> [String] {
        var lines: [String] = []
        _ = await eventually(timeout: timeout) {
            lines = accessLog.filter(matching)
            return lines.count >= count
        }
        return lines
    }

    /// Requests the tier logged for `origin` (an origin URL): the lines whose request-URI is the
    /// tier's form of it, `/<scheme>/<host:port><path?query>`, read once `count` of them are
    /// there (see ``logged(atLeast:timeout:where:)``).
    public func requests(for origin: String, atLeast count: Int) async -> [String] {
        let uri = Self.tierPath(of: origin)
        return await logged(atLeast: count) { $0.hasPrefix(uri + " ") }
    }

    /// `/https/127.0.0.1:8443/p?q` for `https://127.0.0.1:8443/p?q`.
    public static func tierPath(of origin: String) -> String {
        guard let range = origin.range(of: "://") else { return origin }
        return "/" + origin[..<range.lowerBound] + "/" + origin[range.upperBound...]
    }

    /// nginx's error log and output, for a failure message.
    public var errors: String {
        ["error.log", "nginx.out"].map { (try? String(contentsOfFile: folder + "/" + $0, encoding: .utf8)) ?? "" }
            .joined(separator: "\n")
    }

    /// Stops nginx (SIGTERM: a fast stop, connections cut) and waits for the master's exit;
    /// SIGKILL after 20 s.
    public func stop() async {
        guard process.isRunning else { return }
        process.signal(SIGTERM)
        if await process.exited(within: .seconds(20)) == nil { _ = await process.exited() }
        // The workers exit with their master; wait for its port to close so the next request
        // really finds nothing there.
        _ = await eventually(timeout: .seconds(10)) { !Self.canConnect(port: port) }
    }

    /// Stops nginx if it runs and removes the folder.
    public func remove() async {
        await stop()
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Why the tier could not start.
    public struct Failure: Error, CustomStringConvertible {
        public let step: String
        public let output: String
        public var description: String { "\(step) failed: \(output)" }
    }

    /// A port on 127.0.0.1 that was free a moment ago (bound, read, closed).
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else { throw Failure(step: "bind", output: String(cString: strerror(errno))) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether something accepts a TCP connection on 127.0.0.1:`port`.
    static func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
