import ImgdCore

/// Where a list is in its life.
public enum ListState: String, Sendable, Equatable, CaseIterable {
    /// Its URLs are being recorded; the file is still in the spool.
    case claiming
    /// Recorded, file in `spool/.claimed/`; URLs being fetched.
    case active
    /// Recorded, file in `spool/.claimed/`, waiting for its turn: `max-active-lists` lists are
    /// being warmed. Never stored: the database has such a list as `active` (it is to be
    /// warmed, and resumes as such); ``SpoolService/lists()`` shows it so.
    case waiting
    /// Held to a calendar window that is closed (a `[window]` table's `lists` names it): it
    /// waits without a turn, or, caught warming when its window closed, its queued URLs wait
    /// while its running transfers finish. Never stored, like ``waiting``.
    case held
    /// Every URL cached.
    case done
    /// Finished with at least one failure.
    case failed
    /// Withdrawn by `cancel`.
    case cancelled

    /// True once nothing more will happen to it.
    public var isFinished: Bool { self == .done || self == .failed || self == .cancelled }
}

/// One list as the state database records it.
public struct ListRecord: Sendable, Equatable {
    public let id: Int
    /// The name it was dropped under (made unique among lists still in progress).
    public let name: String
    /// Its file's name in `spool/.claimed/`.
    public let claimedFile: String
    public let format: String
    public var state: ListState
    /// Its images are pinned this long after they are cached, when set (milliseconds).
    public let pinMilliseconds: Int?
    public var total: Int
    public var pending: Int
    public var cached: Int
    public var alreadyCached: Int
    public var failed: Int
    public var bytes: Int
    /// Wall-clock milliseconds.
    public let claimedAt: Int
    public var finishedAt: Int?
    /// Its file's name in `done/` or `failed/` once finished (the dropped name, or `NAME.N.ext`
    /// when that was taken there).
    public var finishedFile: String? = nil
    /// The uid that owned its file when it was claimed: that user may `cancel` it. Nil for
    /// lists claimed before this was recorded (only the privileged may cancel those).
    public var owner: UInt32? = nil
    /// Its `# refresh:` header: when its cached images are due for revalidation, over the
    /// daemon's `refresh`; nil when it has none.
    public var refresh: RefreshRule? = nil
    /// When it must be warmed by (its `# ready-by:`, its JSON object's `ready_by`, or `add`'s),
    /// in wall-clock milliseconds; nil when it has no deadline.
    public var readyBy: Int? = nil
    /// Its place among the lists waiting for their turn (1 starts next) when ``state`` is
    /// ``ListState/waiting``; nil otherwise. Not stored.
    public var position: Int? = nil
    /// The calendar windows it waits for when ``state`` is ``ListState/held``. Not stored.
    public var heldFor: [String] = []
    /// How a list with a deadline stands while it is warmed (``DeadlineEstimate``). Not stored.
    public var estimate: DeadlineEstimate? = nil

    /// Whether it finished by its deadline, every URL settled (cached, or failed: failures are
    /// counted apart) and not cancelled; nil while unfinished or without a deadline.
    public var deadlineMet: Bool? {
        guard let readyBy, state.isFinished, let finishedAt else { return nil }
        return state != .cancelled && finishedAt <= readyBy
    }

    /// The uid in whose namespace its items' chosen keys live (``CacheKey/init(chosen:owner:)``):
    /// its owner's, or, for a list claimed before owners were recorded, `UInt32.max`, which no
    /// member has (so such a list's chosen keys are nobody's to share).
    public var keyOwner: UInt32 { owner ?? .max }
}

/// How one URL of a list ended.
public enum ListURLOutcome: Sendable, Equatable {
    /// Downloaded for this list (`servedBy`: the mirror it came from, when not its URL).
    case cached(bytes: Int, servedBy: String? = nil)
    /// Was in the cache already.
    case alreadyCached(bytes: Int)
    case failed(code: String, message: String)
}

/// A URL of a list that failed, for the report.
public struct ListFailure: Sendable, Equatable {
    public let line: Int
    public let url: String
    public let code: String
    public let message: String
    /// The key its item chose, if it did (an object item's `key`).
    public var chosenKey: String? = nil
}
