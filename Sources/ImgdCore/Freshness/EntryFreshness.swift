/// What the cache index keeps about a cached entry's freshness, and the one place that decides
/// whether it is due for revalidation.
public struct EntryFreshness: Sendable, Equatable {
    /// When imgd last got the entry's body or a `304` for it (milliseconds since 1970): the age
    /// a `refresh` duration is measured from.
    public var validatedAt: Int
    /// When the response's own lifetime ends (milliseconds since 1970): validated-at plus its
    /// lifetime minus its `Age`. Nil when it gave none.
    public var freshUntil: Int?
    public var noCache: Bool
    public var immutable: Bool

    public init(validatedAt: Int, freshUntil: Int? = nil, noCache: Bool = false, immutable: Bool = false) {
        self.validatedAt = validatedAt
        self.freshUntil = freshUntil
        self.noCache = noCache
        self.immutable = immutable
    }

    /// The freshness of a response that arrived at `receivedAt`.
    public init(_ response: ResponseFreshness, receivedAt: Int) {
        self.init(
            validatedAt: receivedAt,
            freshUntil: response.lifetimeMilliseconds.map { receivedAt + max(0, $0 - response.ageMilliseconds) },
            noCache: response.noCache, immutable: response.immutable)
    }

    /// The freshness after a `304` at `now`: the response's headers when it has any, else the
    /// lifetime the entry had, counted again from now.
    public func revalidated(by response: ResponseFreshness, at now: Int) -> EntryFreshness {
        if response.hasDirectives { return EntryFreshness(response, receivedAt: now) }
        var renewed = self
        renewed.validatedAt = now
        renewed.freshUntil = freshUntil.map { now + max(0, $0 - validatedAt) }
        return renewed
    }

    /// Whether the entry is due under `rule` at `now` (milliseconds since 1970), with
    /// `minFresh` the floor of a response's lifetime under ``RefreshRule/respectHeaders``.
    ///
    /// - `off`: never.
    /// - a duration: when validated that long ago or more; `no-cache` makes every use due,
    ///   unless `immutable`.
    /// - `respect-headers`: `no-cache` (without `immutable`) makes every use due; otherwise due
    ///   once both the response's lifetime and `minFresh` have run out; an entry without a
    ///   lifetime is due after `minFresh`, except an `immutable` one, which never is.
    public func isDue(under rule: RefreshRule, minFresh: Duration, now: Int) -> Bool {
        guard let dueAt = dueAt(under: rule, minFresh: minFresh) else { return false }
        return now >= dueAt
    }

    /// The instant (milliseconds since 1970) from which ``isDue(under:minFresh:now:)`` is true,
    /// or nil when it never is: what a response built from the entry can say of its freshness
    /// (`Cache-Control: max-age`). An entry due at every use (`no-cache`) is due from
    /// `Int.min`. The one place the rules are written: `isDue` asks this.
    public func dueAt(under rule: RefreshRule, minFresh: Duration) -> Int? {
        switch rule {
        case .off:
            return nil
        case .after(let duration):
            if noCache, !immutable { return Int.min }
            return Self.adding(duration, to: validatedAt)
        case .respectHeaders:
            if noCache, !immutable { return Int.min }
            if immutable, freshUntil == nil { return nil }
            // A floor past the end of time is never reached: never due.
            guard let floor = Self.adding(minFresh, to: validatedAt) else { return nil }
            return max(freshUntil ?? validatedAt, floor)
        }
    }

    /// `instant` + `duration` in milliseconds, or nil when that is past `Int.max` (a duration
    /// of centuries from a configuration: never).
    private static func adding(_ duration: Duration, to instant: Int) -> Int? {
        let (sum, overflow) = instant.addingReportingOverflow(duration.wholeMilliseconds)
        return overflow ? nil : sum
    }
}
