#if canImport(Glibc)
import Glibc
#endif
import NIOCore

/// Reads a connection's peer credentials (`SO_PEERCRED`).
enum ControlPeerCredentials {
    /// `struct ucred`, which Glibc's module does not export (it needs `_GNU_SOURCE`): three
    /// 32-bit fields, laid out in declaration order as Swift lays out such a struct.
    private struct RawCredentials: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    /// The peer of `channel`, or ``ControlPeer/unknown`` if the kernel does not say.
    static func read(from channel: any Channel) -> EventLoopFuture<ControlPeer> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(.unknown)
        }
        let raw: EventLoopFuture<RawCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        return raw.map { ControlPeer(pid: $0.pid, uid: $0.uid, gid: $0.gid) }.recover { _ in .unknown }
    }
}
