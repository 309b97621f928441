/// The daemon-wide freshness settings: the `refresh` rule (`off` by default) and `min-fresh`
/// (1 minute by default), which a request's or a list's own `refresh` overrides.
public struct RefreshPolicy: Sendable, Equatable {
    public var rule: RefreshRule
    /// The shortest lifetime ``RefreshRule/respectHeaders`` gives a response: 1 minute by default.
    public var minFresh: Duration

    public static let defaultMinFresh = Duration.seconds(60)

    public init(rule: RefreshRule = .off, minFresh: Duration = RefreshPolicy.defaultMinFresh) {
        self.rule = rule
        self.minFresh = minFresh
    }

    /// Whether an entry of `freshness` is due at `now`, under `override` when the request or list
    /// named its own rule, else under ``rule``.
    public func isDue(_ freshness: EntryFreshness, override: RefreshRule? = nil, now: Int) -> Bool {
        freshness.isDue(under: override ?? rule, minFresh: minFresh, now: now)
    }
}
