/// How urgent a fetch is. Higher priorities are started first, whatever was queued before.
public enum FetchPriority: Int, Sendable, Comparable, CaseIterable {
    /// Warming from a link list.
    case prefetch = 0
    /// Someone is waiting for this image now (`get`).
    case onDemand = 1

    public static func < (lhs: FetchPriority, rhs: FetchPriority) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Who asked for a fetch: the unit of fairness. Queued work is served round-robin across
/// submitters, so a huge list does not starve a small one submitted after it.
public struct SubmitterID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Single on-demand requests share this submitter.
    public static let interactive = SubmitterID(rawValue: 0)

    public var description: String { "submitter \(rawValue)" }
}
