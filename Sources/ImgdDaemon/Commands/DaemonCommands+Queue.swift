import ImgdCore
import ImgdNetwork

/// The queue bounds as they apply to the peer of a request: the daemon's `max-queued` and
/// `max-queued-bytes` for all, and for a member (not root, imgd's own user or admin-group) its
/// share of them (`max-queued-share`), so that one member's flood refuses that member first.
extension DaemonCommands {
    /// The bounds a bounded request of this peer's (`add`, `get` without waiting, `refresh`,
    /// `retry` of a URL) may take the held requests to.
    var heldLimit: HeldRequestLimit {
        let config = services.config.withLock { $0 }
        let limit = config.heldRequestLimit
        return authority.isPrivileged(request.peer) ? limit : limit.sharing(percent: config.maxQueuedShare)
    }

    /// The error for a bounded request refused under `limit`: the member's share when that is
    /// what it would cross, else the daemon's bounds.
    func queueFull(_ limit: HeldRequestLimit, adding count: Int, bytes: Int) -> ControlError {
        let mine = services.downloader.heldRequests(by: request.peer.uid)
        if limit.callerRequests < limit.requests || limit.callerBytes < limit.bytes,
            mine.requests + count > limit.callerRequests || mine.bytes + bytes > limit.callerBytes
        {
            let percent = services.config.withLock { $0.maxQueuedShare }
            return .queueShareFull(uid: request.peer.uid, percent: percent, requests: limit.callerRequests, bytes: limit.callerBytes)
        }
        return .queueFull(requests: limit.requests, bytes: limit.bytes)
    }

    /// The uid whose requests a `cancel` by URL of this peer's stops: nil (everyone's) for the
    /// privileged, else the peer's own.
    var cancellingCaller: UInt32? {
        authority.isPrivileged(request.peer) ? nil : request.peer.uid
    }
}
