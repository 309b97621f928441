#if canImport(Glibc)
import Glibc
#endif

/// Calls `systemCall` (a `read`, `write`, `send`, `poll`, … that returns -1 and sets `errno` on
/// failure) again for as long as it fails with EINTR, a signal that arrived before it did
/// anything; returns its first other result. The one place imgd and imgctl retry an
/// interrupted call, instead of an `if errno == EINTR { continue }` in every loop.
@inlinable
public func retryingOnInterrupt<Result: SignedInteger>(_ systemCall: () -> Result) -> Result {
    while true {
        let result = systemCall()
        if result >= 0 || errno != EINTR { return result }
    }
}
