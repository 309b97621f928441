import NIOCore
import NIOPosix

extension ControlSocketFile {
    /// Binds `bootstrap` to a socket file at `path` as both servers of the daemon do (the control
    /// socket and the HTTP face on a Unix socket): a stale socket file is replaced, a live one or
    /// anything that is not a socket refused; the socket is bound under a private name and moved
    /// into place once its mode (0660) is set, since NIO accepts as soon as it binds and a socket
    /// with the umask's mode would let a client in before the mode says who may connect. It runs
    /// on the caller's actor (the bootstrap is the caller's, and not `Sendable`).
    static func bind(
        _ path: String, with bootstrap: ServerBootstrap, isolation: isolated (any Actor)? = #isolation
    ) async throws(ControlServerError) -> (channel: any Channel, file: ControlSocketFile) {
        try clearStale(at: path)
        let staging = stagingPath(for: path)
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(unixDomainSocketPath: staging ?? path).get()
        } catch {
            throw .cannotListen(address: path, reason: describe(error))
        }
        do throws(ControlServerError) {
            return (channel, try adopt(path, boundAt: staging))
        } catch {
            try? await channel.close()
            throw error
        }
    }

    /// What went wrong with a bind, for a person: the errno's text when NIO gives one.
    static func describe(_ error: any Error) -> String {
        if let error = error as? IOError { return describe(error.errnoCode) }
        return "\(error)"
    }
}
