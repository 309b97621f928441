import Logging
import Synchronization

/// A log level that every copy of a ``JournalLogHandler`` reads, so that one change (a reload)
/// applies to every logger made from it.
final class SharedLogLevel: Sendable {
    /// The level's index in `Logger.Level.allCases`.
    private let index: Atomic<Int>

    init(_ level: Logger.Level) {
        index = Atomic(Self.index(of: level))
    }

    var value: Logger.Level {
        get { Logger.Level.allCases[index.load(ordering: .relaxed)] }
        set { index.store(Self.index(of: newValue), ordering: .relaxed) }
    }

    private static func index(of level: Logger.Level) -> Int {
        Logger.Level.allCases.firstIndex(of: level)!
    }
}
