import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One connection of an ``ImgdAsyncClient`` and the thread that owns it: calls are queued here and
/// run one at a time, in order, with the blocking ``ImgdConnection`` on that thread, never on
/// Swift's cooperative pool. The connection is made on first use and made again after it was
/// lost, so one daemon restart costs the calls in flight, not the client.
final class ConnectionWorker: Sendable {
    typealias Job = @Sendable (ImgdConnectionSlot) -> Void

    let socketPath: String
    /// Jobs not started yet, and whether the worker was told to stop. Guarded by its mutex; the
    /// thread sleeps on `wake` while it is empty.
    private let queue: JobQueue
    /// Calls queued or running, for choosing the least busy worker.
    let load = Atomic<Int>(0)

    init(socketPath: String) throws(ImgdClientError) {
        self.socketPath = socketPath
        queue = JobQueue()
        let started = Unmanaged.passRetained(WorkerStart(queue: queue, socketPath: socketPath))
        var thread = pthread_t()
        let code = pthread_create(&thread, nil, { context in
            let start = Unmanaged<WorkerStart>.fromOpaque(context!).takeRetainedValue()
            start.run()
            return nil
        }, started.toOpaque())
        guard code == 0 else {
            started.release()
            throw .local("cannot start a client thread: \(ImgdClientError.describe(code))")
        }
        pthread_detach(thread)
    }

    /// Runs `job` on the worker's thread after the jobs queued before it; false when the worker
    /// was stopped (the job never runs).
    func submit(_ job: @escaping Job) -> Bool {
        queue.push(job)
    }

    /// Stops the thread once the queued jobs ran; the connection is closed.
    func stop() {
        queue.stop()
    }
}

/// The connection a worker's jobs share, made when first needed.
final class ImgdConnectionSlot {
    let socketPath: String
    private var connection: ImgdConnection?

    init(socketPath: String) {
        self.socketPath = socketPath
    }

    /// Runs `body` with the connection (connecting first if needed). A lost connection or a reply
    /// the protocol does not allow drops it: the next call connects again.
    func with<T>(_ body: (ImgdConnection) throws(ImgdClientError) -> T) throws(ImgdClientError) -> T {
        let open: ImgdConnection
        if let connection {
            open = connection
        } else {
            open = try ImgdConnection(connectingTo: socketPath)
            connection = open
        }
        do {
            return try body(open)
        } catch {
            switch error {
            case .connectionLost, .badReply, .local:
                open.close()
                connection = nil
            default: break
            }
            throw error
        }
    }

    func close() {
        connection?.close()
        connection = nil
    }
}

/// What a worker thread starts with.
private final class WorkerStart {
    let queue: JobQueue
    let socketPath: String

    init(queue: JobQueue, socketPath: String) {
        self.queue = queue
        self.socketPath = socketPath
    }

    func run() {
        let slot = ImgdConnectionSlot(socketPath: socketPath)
        while let job = queue.pop() {
            job(slot)
        }
        slot.close()
    }
}

/// A queue of jobs one thread takes from, sleeping while it is empty.
///
/// `@unchecked Sendable`: every field is read and written with `mutex` held; the mutex and the
/// condition live in memory allocated here, at addresses that never move.
final class JobQueue: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var jobs: [ConnectionWorker.Job] = []
    private var head = 0
    private var stopped = false

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(wake, nil)
    }

    deinit {
        pthread_cond_destroy(wake)
        pthread_mutex_destroy(mutex)
        wake.deallocate()
        mutex.deallocate()
    }

    func push(_ job: @escaping ConnectionWorker.Job) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard !stopped else { return false }
        jobs.append(job)
        pthread_cond_signal(wake)
        return true
    }

    /// The next job; nil once stopped and empty.
    func pop() -> ConnectionWorker.Job? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while head == jobs.count {
            if stopped { return nil }
            pthread_cond_wait(wake, mutex)
        }
        let job = jobs[head]
        head += 1
        if head == jobs.count {
            jobs.removeAll(keepingCapacity: true)
            head = 0
        }
        return job
    }

    func stop() {
        pthread_mutex_lock(mutex)
        stopped = true
        pthread_cond_signal(wake)
        pthread_mutex_unlock(mutex)
    }
}
