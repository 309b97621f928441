#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

/// The dedicated thread the monitor blocks in `poll` on, so no thread of Swift's cooperative
/// pool is ever held. A pthread rather than Foundation's `Thread` because it can be joined:
/// ``MemoryPressureMonitor/run(onWatching:)`` returns only after the thread has exited.
final class PressureThread {
    /// What the thread runs, passed through `pthread_create`'s context pointer (a C function
    /// pointer cannot capture it).
    private final class Body {
        let name: String
        let work: @Sendable () -> Void

        init(name: String, work: @escaping @Sendable () -> Void) {
            self.name = name
            self.work = work
        }
    }

    private let handle: pthread_t

    private init(handle: pthread_t) {
        self.handle = handle
    }

    /// Starts a thread named `name` (at most 15 bytes show) running `work`.
    static func spawn(name: String, _ work: @escaping @Sendable () -> Void) throws(MemoryPressureError) -> PressureThread {
        let context = Unmanaged.passRetained(Body(name: name, work: work)).toOpaque()
        var handle = pthread_t()
        let result = pthread_create(&handle, nil, { context in
            let body = Unmanaged<Body>.fromOpaque(context!).takeRetainedValue()
            PressureThread.nameCurrentThread(body.name)
            body.work()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw .cannotStartThread(errno: result)
        }
        return PressureThread(handle: handle)
    }

    /// Waits for the thread to exit. Called once its work has reported back, so this waits only
    /// for the last instructions of its exit, not for the work.
    func join() {
        pthread_join(handle, nil)
    }

    /// Names the calling thread for `top -H`, `ps -L` and tests. Through /proc because
    /// `pthread_setname_np` is a GNU extension Swift's Glibc module does not declare; a
    /// failure only leaves the default name.
    private static func nameCurrentThread(_ name: String) {
        let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        try? writeAll(descriptor, Array(name.utf8.prefix(15)))
        close(descriptor)
    }
}
