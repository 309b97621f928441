/// What ``SpoolService/cancel(list:if:)`` did.
public enum ListCancellation: Sendable, Equatable {
    /// Cancelled; `pending` URLs were still to fetch.
    case cancelled(pending: Int)
    /// No list in progress has that name.
    case notFound
    /// Not allowed for this caller; `owner` is the uid that owned the list's file (nil: not recorded).
    case forbidden(owner: UInt32?)
}

/// What ``SpoolService/retry(list:if:)`` did.
public enum ListRetry: Sendable, Equatable {
    /// Requeued `count` failed URLs (0: the list had none); `expired` failed `url_expired` and
    /// were not requeued (only re-signed URLs, in a new list, can cure them).
    case requeued(Int, expired: Int = 0)
    /// No list has that name.
    case notFound
    /// Not allowed for this caller; `owner` is the uid that owned the list's file (nil: not recorded).
    case forbidden(owner: UInt32?)
}
