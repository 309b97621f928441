import DequeModule
import ImgdCore

/// What became of one job: a record in ``OutcomeHistory``. No strings: a failure's message is
/// the failure memory's; this keeps its class and status only (~56 bytes).
public struct OutcomeRecord: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// A body was downloaded and cached.
        case fetched
        /// A revalidation's `304`: the entry was current.
        case revalidated
        /// The job ended with a failure (``code``).
        case failed
        /// Every waiter left, or the engine stopped.
        case cancelled
    }

    /// What asked for it: an on-demand request (`get`, an `add` of high priority), a prefetch
    /// (a list, `add`, `retry`) or a revalidation (a due entry, `refresh`).
    public enum Cause: String, Sendable {
        case onDemand = "on_demand"
        case prefetch
        case revalidation
    }

    /// When it ended, milliseconds since the epoch.
    public let at: Int
    public let kind: Kind
    /// The failure's class, for ``Kind/failed``.
    public let code: FailureCode?
    /// The status of an HTTP failure.
    public let httpStatus: Int?
    /// The body's bytes, for ``Kind/fetched`` (0 otherwise).
    public let bytes: Int
    /// From the request's arrival at the engine to its end (queue, attempts, back-offs).
    public let durationMilliseconds: Int
    public let attempts: Int
    /// Whether its last request went through the tier.
    public let viaTier: Bool
    public let cause: Cause
}

/// The last outcomes of each key, for `explain`: "what happened the last times this was asked".
///
/// Bounded twice: at most ``perKey`` records a key (the newest; 8), and at most ``capacity``
/// keys (4,096), forgetting the key written longest ago first. So at most about
/// 4,096 × (8 × 56 + ~150) bytes ≈ 2.5 MiB, whatever the daemon fetches.
///
/// Written once per finished job on the engine's thread, which owns it (no lock): hits are not
/// recorded (a memory hit never reaches the engine; the entry's `hit_count` and `last_access`
/// answer for them), nor answers the failure memory gave without a job.
struct OutcomeHistory {
    /// Records kept per key.
    static let perKey = 8
    /// Keys kept by default.
    static let defaultCapacity = 4_096

    private struct Ring {
        var records: [OutcomeRecord] = []
        /// Where the next record goes once ``records`` is full.
        var next = 0
        /// The ``OutcomeHistory/generation`` of its last write.
        var written: UInt64 = 0

        mutating func append(_ record: OutcomeRecord, generation: UInt64) {
            if records.count < OutcomeHistory.perKey {
                records.append(record)
            } else {
                records[next] = record
                next = (next + 1) % OutcomeHistory.perKey
            }
            written = generation
        }

        /// Oldest first.
        var ordered: [OutcomeRecord] {
            records.count < OutcomeHistory.perKey ? records : Array(records[next...] + records[..<next])
        }
    }

    let capacity: Int
    private var rings: [CacheKey: Ring] = [:]
    /// Keys in the order they were written; a key written again appears again, and only its
    /// place with its ring's generation counts.
    private var order: Deque<(key: CacheKey, written: UInt64)> = []
    private var generation: UInt64 = 0

    init(capacity: Int = OutcomeHistory.defaultCapacity) {
        precondition(capacity >= 1, "the outcome history needs room for one key")
        self.capacity = capacity
    }

    /// Keys with records now.
    var count: Int { rings.count }

    mutating func record(_ record: OutcomeRecord, for key: CacheKey) {
        generation += 1
        // Changed in place: no copy of the ring's array.
        rings[key, default: Ring()].append(record, generation: generation)
        order.append((key, generation))
        while rings.count > capacity, let oldest = order.popFirst() {
            if rings[oldest.key]?.written == oldest.written { rings[oldest.key] = nil }
        }
        // A key written again and again leaves stale places behind: keep them few.
        if order.count > 2 * rings.count + 1024 {
            order = Deque(order.filter { rings[$0.key]?.written == $0.written })
        }
    }

    /// `key`'s records, oldest first; empty when none is kept.
    func records(for key: CacheKey) -> [OutcomeRecord] {
        rings[key]?.ordered ?? []
    }
}
