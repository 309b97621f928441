import ImgdCore

/// The quotas in force and the owners waiting for a quota pass: ``DiskCache/quotaState``.
struct QuotaState {
    var quotas = UserQuotas()
    /// Owners charged since the last pass, to be checked against their limits.
    var due: Set<UInt32> = []
    /// Whether a pass is queued on the housekeeping executor (it takes every owner due by then).
    var isScheduled = false
}

extension DiskCache {
    /// The quotas in force.
    public var quotas: UserQuotas { quotaState.withLock { $0.quotas } }

    /// Takes new quotas (at start and at each reload) and checks every owner against them on
    /// the housekeeping executor: a user whose limit was lowered is evicted down to it by that
    /// pass, least recently used first, pins kept.
    public func setQuotas(_ quotas: UserQuotas) {
        quotaState.withLock { $0.quotas = quotas }
        guard quotas.isActive else { return }
        let owners = (try? index.ownerUsage(now: WallClock.nowMilliseconds())) ?? []
        charged(owners.map(\.owner))
    }

    /// Why a body of `bytes` charged to `owner` cannot be kept, or nil when it can: it is
    /// larger than what the owner may hold, its limit less its pinned bytes (which its quota
    /// never evicts). Called before the body is published, so a refusal loses nothing already
    /// cached. A body that replaces an entry charged to someone else (a refresh) is judged
    /// against that owner, whom the replaced row stays charged to. No query unless `owner` has
    /// a limit.
    public func quotaRefusal(owner: UInt32?, bytes: Int, key: CacheKey) -> String? {
        guard let owner else { return nil }
        let quotas = quotas
        guard let limit = quotas.limit(for: owner) else { return nil }
        let now = WallClock.nowMilliseconds()
        let pinned = (try? index.pinnedBytes(of: owner, now: now)) ?? 0
        guard bytes > limit - pinned else { return nil }
        // Rare from here: the body is too large for the uid asking. The row it would replace
        // keeps its owner, so judge it against that owner.
        if let existing = try? index.entry(for: key), existing.owner != owner {
            guard let other = existing.owner, let otherLimit = quotas.limit(for: other) else { return nil }
            let otherPinned = (try? index.pinnedBytes(of: other, now: now)) ?? 0
            guard bytes > otherLimit - otherPinned else { return nil }
            return Self.refusal(bytes: bytes, owner: other, limit: otherLimit, pinned: otherPinned)
        }
        return Self.refusal(bytes: bytes, owner: owner, limit: limit, pinned: pinned)
    }

    private static func refusal(bytes: Int, owner: UInt32, limit: Int, pinned: Int) -> String {
        let room = max(0, limit - pinned)
        return "the image's \(ByteCount(bytes)) is more than uid \(owner) may hold: its quota is \(ByteCount(limit))"
            + (pinned > 0 ? ", \(ByteCount(pinned)) of it pinned, leaving \(ByteCount(room))" : "")
    }

    /// Notes that rows charged to `owners` were committed: each owner with a limit is checked on
    /// the housekeeping executor, and one over it loses its own least recently used, unpinned
    /// entries until it is under (``QuotaKeeper``). Cheap when no quota is set: one lock.
    public func charged(_ owners: some Sequence<UInt32>) {
        let schedule = quotaState.withLock { state -> Bool in
            guard state.quotas.isActive else { return false }
            for owner in owners where state.quotas.limit(for: owner) != nil { state.due.insert(owner) }
            guard !state.due.isEmpty, !state.isScheduled else { return false }
            state.isScheduled = true
            return true
        }
        if schedule { QuotaKeeper(cache: self).schedule() }
    }

    /// The owners due for a check, taken (the next ``charged(_:)`` schedules a new pass).
    func takeDueOwners() -> (owners: Set<UInt32>, quotas: UserQuotas) {
        quotaState.withLock { state in
            defer {
                state.due.removeAll()
                state.isScheduled = false
            }
            return (state.due, state.quotas)
        }
    }
}
