import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension ImgdAsyncClient {
    /// `subscribe` on a connection of its own: the named events (all when nil) as they come.
    /// The connection's thread reads them; the newest `bufferLimit` (10,000 by default, as the
    /// blocking connection keeps) are buffered for a slow consumer, older ones dropped (the
    /// daemon's `events_dropped` and the `seq` gaps say so). The stream ends when the daemon
    /// closes the connection; ending the iteration closes the connection. Returns once the
    /// daemon confirmed the subscription: every event after that is in the stream.
    public func events(_ names: [String]? = nil, bufferLimit: Int = 10_000) async throws(ImgdClientError) -> AsyncStream<ImgdEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: ImgdEvent.self, bufferingPolicy: .bufferingNewest(bufferLimit))
        let socketPath = self.socketPath
        let subscribed: Result<Void, ImgdClientError> = await withCheckedContinuation { started in
            let reader = EventReader(socketPath: socketPath, names: names, continuation: continuation, started: started)
            continuation.onTermination = { _ in reader.stop() }
            let context = Unmanaged.passRetained(reader)
            var thread = pthread_t()
            let code = pthread_create(&thread, nil, { context in
                Unmanaged<EventReader>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, context.toOpaque())
            if code == 0 {
                pthread_detach(thread)
            } else {
                context.release()
                continuation.finish()
                started.resume(returning: .failure(.local("cannot start a client thread: \(ImgdClientError.describe(code))")))
            }
        }
        try subscribed.get()
        return stream
    }
}

/// One event subscription's connection and thread.
private final class EventReader: Sendable {
    let socketPath: String
    let names: [String]?
    let continuation: AsyncStream<ImgdEvent>.Continuation
    /// Resumed once, when the subscription is confirmed or failed.
    let started: CheckedContinuation<Result<Void, ImgdClientError>, Never>
    /// The socket while it is open (-1 before and after), and whether the consumer left: a
    /// stop shuts the socket down under the lock, so it never touches a number reused after close.
    private let socket = Mutex((descriptor: Int32(-1), stopped: false))

    init(
        socketPath: String, names: [String]?, continuation: AsyncStream<ImgdEvent>.Continuation,
        started: CheckedContinuation<Result<Void, ImgdClientError>, Never>
    ) {
        self.started = started
        self.socketPath = socketPath
        self.names = names
        self.continuation = continuation
    }

    func stop() {
        socket.withLock { state in
            state.stopped = true
            if state.descriptor >= 0 { _ = shutdown(state.descriptor, Int32(SHUT_RDWR)) }
        }
    }

    func run() {
        defer { continuation.finish() }
        let connection: ImgdConnection
        do throws(ImgdClientError) {
            connection = try ImgdConnection(connectingTo: socketPath)
        } catch {
            started.resume(returning: .failure(error))
            return
        }
        // The consumer may have left already: then nothing would ever end the read below.
        let left = socket.withLock { state -> Bool in
            if !state.stopped { state.descriptor = connection.descriptor }
            return state.stopped
        }
        defer {
            socket.withLock { state in
                state.descriptor = -1
                connection.close()
            }
        }
        if left {
            started.resume(returning: .success(()))
            return
        }
        do throws(ImgdClientError) {
            try connection.subscribe(names)
            started.resume(returning: .success(()))
        } catch {
            started.resume(returning: .failure(error))
            return
        }
        while case .event(let event)? = try? connection.nextEvent(timeout: nil) {
            continuation.yield(event)
        }
    }
}
