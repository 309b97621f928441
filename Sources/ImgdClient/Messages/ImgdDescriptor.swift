import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A file descriptor received from imgd (`get` with `"fd": true`): read-only, close-on-exec,
/// owned by this object and closed when it goes, unless ``take()`` handed it over first.
public final class ImgdDescriptor: Sendable {
    /// The descriptor number (valid until this object is released or ``take()`` is called).
    public let rawValue: Int32
    /// Whether this object still owns (and will close) the descriptor.
    private let owned = Mutex(true)

    /// Takes ownership of `rawValue`.
    public init(owning rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// Hands the descriptor to the caller, who closes it; nil when it was taken already.
    public func take() -> Int32? {
        owned.withLock { owned in
            guard owned else { return nil }
            owned = false
            return rawValue
        }
    }

    deinit {
        if owned.withLock({ $0 }) { Glibc.close(rawValue) }
    }
}
