import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Another member of the daemon's group, for the peer tests: `imgctl` run as uid 65534 (nobody)
/// with primary group 65534 through util-linux's `setpriv`, with no other group or with the
/// ones given. The tests run as root; the daemon's socket is handed to group 65534
/// (``share(_:)``), as the unit hands it to group imgd.
struct OtherUser: Sendable {
    static let uid: UInt32 = 65534
    static let gid: UInt32 = 65534
    static let setpriv = "/usr/bin/setpriv"

    /// Whether a child can run as another uid here (root, and setpriv installed).
    static let available = getuid() == 0 && FileManager.default.isExecutableFile(atPath: setpriv)

    /// Supplementary groups.
    let groups: [UInt32]

    /// A member with no supplementary group.
    static let plain = OtherUser(groups: [])

    /// A member also in `gid`.
    static func member(of gid: UInt32) -> OtherUser { OtherUser(groups: [gid]) }

    /// Runs `imgctl` with `arguments` (a subcommand first) against `socket`, as this user.
    func imgctl(_ arguments: [String], socket: String) async throws -> ChildProcess.Output {
        let groupOption = groups.isEmpty ? "--clear-groups" : "--groups=" + groups.map(String.init).joined(separator: ",")
        let command = [arguments[0], "--socket", socket] + arguments.dropFirst()
        return try await ChildProcess.run(
            Self.setpriv, ["--reuid=\(Self.uid)", "--regid=\(Self.gid)", groupOption, "--", BinaryRunner.imgctlPath] + command,
            in: "/", environment: ["PATH": "/usr/bin:/bin"], timeout: .seconds(60))
    }

    /// Sends one request line to `socket` as this user and returns the parsed reply: for the
    /// requests `imgctl` has no option for (object items, chosen keys). Python's standard
    /// library makes the connection (python3-minimal: on every Debian), as this uid.
    func call(_ line: String, socket: String) async throws -> [String: Any] {
        let groupOption = groups.isEmpty ? "--clear-groups" : "--groups=" + groups.map(String.init).joined(separator: ",")
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            s.sendall(sys.argv[2].encode() + b"\\n")
            reply = b""
            while not reply.endswith(b"\\n"):
                chunk = s.recv(65536)
                if not chunk: break
                reply += chunk
            sys.stdout.write(reply.decode())
            """
        let output = try await ChildProcess.run(
            Self.setpriv, ["--reuid=\(Self.uid)", "--regid=\(Self.gid)", groupOption, "--", "/usr/bin/python3", "-c", script, socket, line],
            in: "/", environment: ["PATH": "/usr/bin:/bin"], timeout: .seconds(60))
        guard output.status == 0 else { throw OtherUserError.callFailed(status: output.status, stderr: output.stderr) }
        return try KeptConnection.parseReply(output.stdout.trimmingCharacters(in: .newlines))
    }

    /// The `result` of a successful request sent as this user (fails the test otherwise).
    func result(_ line: String, socket: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: Any] {
        let reply = try await call(line, socket: socket)
        #expect(reply["ok"] as? Bool == true, "reply: \(reply)", sourceLocation: sourceLocation)
        return reply["result"] as? [String: Any] ?? [:]
    }

    /// Lets group 65534 connect to `socket` (mode 0660) and reach it (its folder must be
    /// searchable by others, as a scratch folder is).
    static func share(_ socket: String) throws {
        guard chown(socket, 0, gid) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// The gid of the first of `names` that exists here.
    static func existingGroup(_ names: [String]) -> (name: String, gid: UInt32)? {
        for name in names {
            if let entry = getgrnam(name) { return (name, entry.pointee.gr_gid) }
        }
        return nil
    }
}

/// A request sent as another user that did not get a reply.
enum OtherUserError: Error, CustomStringConvertible {
    case callFailed(status: Int32, stderr: String)

    var description: String {
        switch self {
        case .callFailed(let status, let stderr): "the request as uid \(OtherUser.uid) exited \(status): \(stderr)"
        }
    }
}
