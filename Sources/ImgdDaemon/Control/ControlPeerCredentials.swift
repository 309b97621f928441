#if canImport(Glibc)
import Glibc
#endif
import NIOCore

/// Reads a connection's peer credentials: `SO_PEERCRED` (pid, uid, gid) and `SO_PEERGROUPS`
/// (the supplementary groups), both recorded by the kernel when the peer connected, so neither
/// can change under us nor be raced by a pid that is reused.
enum ControlPeerCredentials {
    /// `struct ucred`, which Glibc's module does not export (it needs `_GNU_SOURCE`): three
    /// 32-bit fields, laid out in declaration order as Swift lays out such a struct.
    private struct RawCredentials: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    /// A zero-byte buffer: `SO_PEERGROUPS` into it succeeds only when the peer has no
    /// supplementary groups (otherwise ERANGE).
    private struct NoBytes: Sendable {}

    /// `SO_PEERGROUPS` (Linux 4.13+), from `<asm-generic/socket.h>`, which Glibc's module does not export.
    private static let peerGroupsOption = SocketOptionName(59)

    /// Supplementary groups read; a peer with more is taken as having none (it is then not a
    /// member of `admin-group` through them; its primary gid still counts).
    static let maxGroups = 256

    /// The peer of `channel`, or ``ControlPeer/unknown`` if the kernel does not say.
    static func read(from channel: any Channel) -> EventLoopFuture<ControlPeer> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(.unknown)
        }
        let raw: EventLoopFuture<RawCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        return raw.flatMap { credentials in
            groups(of: provider).map { groups in
                ControlPeer(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, groups: groups)
            }
        }.recover { _ in .unknown }
    }

    /// The peer's supplementary groups; empty when it has none, more than ``maxGroups``, or the
    /// kernel does not know the option.
    private static func groups(of provider: any SocketOptionProvider) -> EventLoopFuture<[UInt32]> {
        let none: EventLoopFuture<NoBytes> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: peerGroupsOption)
        return none.map { _ in [UInt32]() }.flatMapError { _ in
            let slots: EventLoopFuture<InlineArray<256, UInt32>> = provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET), name: peerGroupsOption)
            return slots.map { decode($0) }.recover { _ in [] }
        }
    }

    /// The groups in `slots`, which the kernel filled from the start and NIO zeroed beyond. The
    /// kernel keeps a process's groups sorted, so the real ones rise and the first entry not
    /// above its predecessor is filler (at least one group is known to be there).
    private static func decode(_ slots: InlineArray<256, UInt32>) -> [UInt32] {
        var groups = [slots[0]]
        for index in 1..<slots.count {
            guard slots[index] > slots[index - 1] else { break }
            groups.append(slots[index])
        }
        return groups
    }
}
