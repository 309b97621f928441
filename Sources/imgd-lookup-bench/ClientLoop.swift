#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

/// A thread with a `poll` loop that drives some of the connections, as redis-benchmark drives
/// all of its own from one event loop: the connections that became readable since the last wait
/// are served one after the other, so a busy client costs one wake-up per batch of replies, not
/// one per reply. (`poll` rather than epoll: Glibc's Swift module has no epoll, and scanning a
/// few dozen descriptors costs less than a reply.)
///
/// `@unchecked Sendable`: the main thread uses a loop only before ``start()`` and after
/// ``join()``; in between, only the loop's thread does.
final class ClientLoop: @unchecked Sendable {
    /// A wait this long with no reply from any connection means the daemon stopped answering.
    static let replyTimeoutSeconds = 10

    let clients: [LookupClient]
    private var thread = pthread_t()

    init(clients: [LookupClient]) {
        self.clients = clients
    }

    func start() {
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(&thread, nil, { context in
            let loop = Unmanaged<ClientLoop>.fromOpaque(context!).takeRetainedValue()
            loop.run()
            return nil
        }, context)
        precondition(status == 0, "pthread_create: \(String(cString: strerror(status)))")
    }

    func join() {
        pthread_join(thread, nil)
    }

    private func run() {
        for client in clients { client.begin() }
        // The connections still running, and their descriptors in the same order.
        var running = clients.filter { !$0.isFinished }
        var descriptors = running.map { pollfd(fd: $0.socket, events: Int16(POLLIN), revents: 0) }
        while !running.isEmpty {
            let ready = retryingOnInterrupt { poll(&descriptors, nfds_t(descriptors.count), Int32(Self.replyTimeoutSeconds * 1000)) }
            guard ready > 0 else {
                for client in running { client.timedOut(after: Self.replyTimeoutSeconds) }
                return
            }
            var finishedAny = false
            for slot in descriptors.indices where descriptors[slot].revents != 0 {
                running[slot].readable()
                finishedAny = finishedAny || running[slot].isFinished
            }
            if finishedAny {
                running.removeAll { $0.isFinished }
                descriptors = running.map { pollfd(fd: $0.socket, events: Int16(POLLIN), revents: 0) }
            }
        }
    }
}
