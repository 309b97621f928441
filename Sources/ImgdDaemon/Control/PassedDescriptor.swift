#if canImport(Glibc)
import Glibc
#endif

/// A descriptor the control server passes to a client with a reply (`get` with `"fd": true`):
/// owned by this object and closed when it goes, once sent or when the connection closes
/// first, so no path (a cancelled command, a torn-down connection) can leak it. The client gets
/// its own copy from the kernel.
public final class PassedDescriptor: Sendable {
    /// The descriptor, read-only.
    public let rawValue: Int32

    /// Takes ownership of `rawValue`.
    public init(owning rawValue: Int32) {
        self.rawValue = rawValue
    }

    deinit {
        Glibc.close(rawValue)
    }
}
