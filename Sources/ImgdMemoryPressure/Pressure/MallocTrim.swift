#if canImport(Glibc)
import Glibc
#endif

/// Gives freed heap memory back to the system, after a purge under memory pressure.
///
/// glibc keeps freed memory in its arenas for reuse; without a trim, emptying the memory tier
/// lowers what the process uses but not what the system sees it holding. `malloc_trim` is a glibc
/// extension that Swift's Glibc module does not declare, so it is looked up at run time; on a C
/// library without it this does nothing.
public enum MallocTrim {
    private typealias Function = @convention(c) (Int) -> Int32

    /// glibc's `malloc_trim`, found once. `nil` handle means the global symbol scope
    /// (`RTLD_DEFAULT`, which Swift does not import).
    private static let function: Function? = dlsym(nil, "malloc_trim").map { unsafeBitCast($0, to: Function.self) }

    /// Whether glibc's `malloc_trim` was found (without it a purge releases nothing to the system).
    public static var isAvailable: Bool { function != nil }

    /// Calls `malloc_trim(0)`: every arena, keeping no extra padding. Takes a few milliseconds
    /// on a large heap; call it after a purge, not on a hot path. True when memory was given
    /// back to the system (false: none could be, or `malloc_trim` is missing).
    @discardableResult
    public static func releaseFreeMemory() -> Bool {
        function?(0) == 1
    }
}
