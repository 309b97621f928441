#if canImport(Glibc)
import Glibc
#endif

/// What a ``MemoryPressureMonitor`` watches once its source is open: the source in use after
/// any fallback, and why it fell back. Its ``description`` is the line the daemon logs at start.
public struct MemoryPressureWatching: Sendable, Equatable, CustomStringConvertible {
    /// A PSI trigger the kernel would not take from this process.
    public struct Refusal: Sendable, Equatable {
        /// The trigger written, e.g. `some 200000 2000000`.
        public let trigger: String
        /// The kernel's answer: EINVAL (a window too short for an unprivileged process),
        /// EACCES/EPERM (the file is not ours to write: systemd before v254), EROFS.
        public let errno: Int32

        public init(trigger: String, errno: Int32) {
            self.trigger = trigger
            self.errno = errno
        }
    }

    /// The source in use.
    public let source: MemoryPressureSource
    /// Set when ``source`` is polling because the kernel refused the trigger asked for.
    public let refusal: Refusal?

    public init(source: MemoryPressureSource, refusal: Refusal? = nil) {
        self.source = source
        self.refusal = refusal
    }

    /// "memory pressure: reading avg10 of /proc/pressure/memory every 5s (pressure above 10.0%);
    /// the kernel refused the trigger some 200000 2000000: Invalid argument".
    public var description: String {
        guard let refusal else { return source.description }
        return "\(source); the kernel refused the trigger \(refusal.trigger): \(String(cString: strerror(refusal.errno)))"
    }
}
