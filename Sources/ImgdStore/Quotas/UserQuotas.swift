/// How many bytes each uid's entries may hold in the disk tier (quotas per user): a default for
/// every uid, and limits for named uids that override it (`[quota."alice"]`, `[quota."uid:1000"]`).
/// A uid with no limit, or one marked exempt, may hold anything under the cache's own cap.
///
/// No quotas by default: ``limit(for:)`` is nil for every uid.
public struct UserQuotas: Sendable, Equatable {
    /// The limit of every uid without a table of its own (`quota-per-user`); nil for none.
    public var defaultLimit: Int?
    /// Per uid: its own limit, or nil for exempt (`limit = "none"`), over ``defaultLimit``.
    public var perUser: [UInt32: Int?]

    public init(defaultLimit: Int? = nil, perUser: [UInt32: Int?] = [:]) {
        self.defaultLimit = defaultLimit
        self.perUser = perUser
    }

    /// `uid`'s limit in bytes, or nil when it has none.
    public func limit(for uid: UInt32) -> Int? {
        if let own = perUser[uid] { return own }
        return defaultLimit
    }

    /// Whether any uid has a limit (when none does, nothing is checked or enforced).
    public var isActive: Bool {
        defaultLimit != nil || perUser.values.contains { $0 != nil }
    }
}
