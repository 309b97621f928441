/// Which transfers `max-rate` holds back.
public enum RateCapScope: String, Sendable, CaseIterable {
    /// Transfers warming link lists (and `add`s); an on-demand `get` is exempt, and a prefetch a
    /// `get` joins is exempt from then on.
    case prefetch
    /// Every transfer, on-demand `get`s included.
    case all
}
