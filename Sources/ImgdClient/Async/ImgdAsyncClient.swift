import ImgdProtocol
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// imgd's client for Swift concurrency: `async` calls over a few control connections.
///
/// Each connection belongs to one thread of its own that runs its calls in order with the
/// blocking ``ImgdConnection``, so no call blocks Swift's cooperative pool. A call goes to the
/// connection with the fewest calls waiting. Cancelling a task that awaits a call makes the
/// call throw ``ImgdClientError/cancelled`` at once; a request already sent is still answered
/// on its connection, and what that answer holds (a descriptor) is released there.
///
/// ```swift
/// let client = try ImgdAsyncClient(socketPath: "/run/imgd/imgd.sock", connections: 4)
/// let image = try await client.get("https://example.com/a.png", options: GetOptions(descriptor: true))
/// ```
public final class ImgdAsyncClient: Sendable {
    /// The control socket's path.
    public let socketPath: String
    private let workers: [ConnectionWorker]

    /// A client of the daemon at `socketPath` (``SocketPathResolver`` finds the usual one) with
    /// `connections` connections (1 by default), each made when its first call runs.
    public init(socketPath: String, connections: Int = 1) throws(ImgdClientError) {
        self.socketPath = socketPath
        var workers: [ConnectionWorker] = []
        for _ in 0..<max(1, connections) {
            workers.append(try ConnectionWorker(socketPath: socketPath))
        }
        self.workers = workers
    }

    deinit {
        close()
    }

    /// Stops the connections' threads once the calls queued run; later calls throw
    /// ``ImgdClientError/closed``.
    public func close() {
        for worker in workers { worker.stop() }
    }

    /// `get` (see ``ImgdConnection/get(_:options:)``).
    public func get(_ url: String, options: GetOptions = GetOptions()) async throws(ImgdClientError) -> CachedImageInfo {
        try await perform { connection throws(ImgdClientError) in try connection.get(url, options: options) }
    }

    /// `add` (see ``ImgdConnection/add(_:priority:)``): how many were accepted.
    public func add(_ urls: [String], priority: String? = nil) async throws(ImgdClientError) -> Int {
        try await perform { connection throws(ImgdClientError) in try connection.add(urls, priority: priority).accepted }
    }

    /// `status`.
    public func status() async throws(ImgdClientError) -> JSONValue {
        try await perform { connection throws(ImgdClientError) in try connection.status() }
    }

    /// `hello`'s `features`.
    public func features() async throws(ImgdClientError) -> Set<String> {
        try await perform { connection throws(ImgdClientError) in try connection.features() }
    }

    /// Any command: its successful reply's `result`; an error reply is thrown.
    public func call(_ command: String, _ arguments: [String: JSONValue] = [:]) async throws(ImgdClientError) -> JSONValue {
        try await perform { connection throws(ImgdClientError) in try connection.succeeded(connection.request(command, arguments)).result }
    }

    /// Runs `body` on the least busy connection's thread and returns its result.
    private func perform<T: Sendable>(
        _ body: @escaping @Sendable (ImgdConnection) throws(ImgdClientError) -> T
    ) async throws(ImgdClientError) -> T {
        let worker = workers.min { $0.load.load(ordering: .relaxed) < $1.load.load(ordering: .relaxed) }!
        let call = PendingCall<T>()
        let outcome: Result<T, ImgdClientError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, ImgdClientError>, Never>) in
                guard call.attach(continuation) else { return }
                worker.load.add(1, ordering: .relaxed)
                let queued = worker.submit { slot in
                    defer { worker.load.subtract(1, ordering: .relaxed) }
                    // Given up before it started: nothing is sent.
                    guard !call.isFinished else { return }
                    let result: Result<T, ImgdClientError>
                    do throws(ImgdClientError) {
                        result = .success(try slot.with(body))
                    } catch {
                        result = .failure(error)
                    }
                    // Nobody waits any more (cancelled): the result, and any descriptor it
                    // holds, is released here.
                    call.finish(result)
                }
                if !queued {
                    worker.load.subtract(1, ordering: .relaxed)
                    call.finish(.failure(.closed))
                }
            }
        } onCancel: {
            call.finish(.failure(.cancelled))
        }
        return try outcome.get()
    }
}

/// A call's continuation, resumed once: by its result or by its cancellation, whichever comes first.
private final class PendingCall<T: Sendable>: Sendable {
    private enum State {
        case waiting
        case attached(CheckedContinuation<Result<T, ImgdClientError>, Never>)
        case finished
    }

    private let state = Mutex(State.waiting)

    /// Attaches the continuation; false (and resumed with `cancelled`) when the call was
    /// cancelled before it.
    func attach(_ continuation: CheckedContinuation<Result<T, ImgdClientError>, Never>) -> Bool {
        let attached = state.withLock { state in
            guard case .waiting = state else { return false }
            state = .attached(continuation)
            return true
        }
        if !attached { continuation.resume(returning: .failure(.cancelled)) }
        return attached
    }

    var isFinished: Bool {
        state.withLock { if case .finished = $0 { true } else { false } }
    }

    /// Resumes the waiter with `result` unless it was resumed already.
    func finish(_ result: Result<T, ImgdClientError>) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<T, ImgdClientError>, Never>? in
            defer { state = .finished }
            if case .attached(let continuation) = state { return continuation }
            return nil
        }
        waiter?.resume(returning: result)
    }
}
