import Foundation
import ImgdTestSupport

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
