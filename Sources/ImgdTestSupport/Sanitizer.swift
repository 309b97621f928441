#if canImport(Glibc)
import Glibc
#endif

/// The sanitizer this build runs under (`make test-tsan`, `make test-asan`), if any. The test
/// runner and the `imgd` it starts come from one build, so what holds for this process holds for
/// the daemon too.
///
/// A few tests measure what only the plain build has: glibc's heap (each sanitizer brings its
/// own allocator, which `malloc_trim` does not reliably reach) and resident memory (both add
/// shadow memory for what the program touches; AddressSanitizer also keeps freed memory in
/// quarantine). They are skipped under the sanitizer that breaks their premise, saying so;
/// `make test` runs them.
public enum Sanitizer: String, Sendable {
    case thread
    case address

    /// How many times longer a test gives the daemon's own work where a limit stands for a
    /// client's patience (a slow-reader timeout): 5 under a sanitizer, whose debug build runs
    /// the daemon's loop several times slower, else 1. The test's pauses stay what they are, so
    /// they are still far shorter than the limit they must stay under.
    public static var slowdown: Int { active == nil ? 1 : 5 }

    /// Found by the runtime's entry point, which each sanitizer exports from the executable.
    public static let active: Sanitizer? = {
        if dlsym(nil, "__tsan_init") != nil { return .thread }
        if dlsym(nil, "__asan_init") != nil { return .address }
        return nil
    }()
}
