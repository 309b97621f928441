import ImgdCore
import ImgdStore
import ImgdTOML

/// One `[quota."NAME"]` table of the configuration file: the limit of one user's entries in the
/// disk tier (quotas per user), over `quota-per-user`.
///
/// ```toml
/// quota-per-user = "2GiB"       # every uid without a table of its own
/// [quota."alice"]               # a user name, resolved with getpwnam_r at start and at each reload
/// limit = "5GiB"
/// [quota."uid:1000"]            # or a uid
/// limit = "500MiB"
/// [quota."backup"]
/// limit = "none"                # exempt: no limit but the cache's own
/// ```
///
/// An unknown user, a size that is not one, a second table for the same uid or a key other
/// than `limit` refuses the whole file (at start, or the reload, which keeps the running
/// settings). Tables come only from the file and reload with it.
public struct QuotaTable: Sendable, Equatable {
    /// The table's name as written: `alice`, `uid:1000`.
    public let name: String
    /// The uid it names (the user's, at the last load).
    public let uid: UInt32
    /// Bytes the uid's entries may hold; nil: exempt (`limit = "none"`).
    public let limit: Int?

    /// The smallest limit a table or `quota-per-user` takes.
    static let minimumLimit = 1024

    /// The keys a quota table may hold.
    static let keys = ["limit"]

    /// The quotas the cache enforces: `quota-per-user` for every uid, these tables over it.
    static func quotas(default perUser: Int?, tables: [QuotaTable]) -> UserQuotas {
        UserQuotas(defaultLimit: perUser, perUser: Dictionary(tables.map { ($0.uid, $0.limit) }, uniquingKeysWith: { $1 }))
    }

    /// A limit's value: a size (at least 1 KiB) or `"none"`; nil for none.
    static func limit(_ value: TOMLValue) throws(SettingError) -> Int? {
        if case .string(let text) = value, text == "none" { return nil }
        let bytes = try DaemonSetting.byteCount(value)
        guard bytes >= minimumLimit else {
            throw SettingError(reason: "at least \(ByteCount(minimumLimit)), or \"none\" for no limit")
        }
        return bytes
    }

    /// Reads the file's `quota` table: one subtable per user, `line` giving each entry's
    /// `FILE:LINE` for errors.
    static func tables(from value: TOMLValue, origin: (Int) -> String, line: Int) throws(ConfigError) -> [QuotaTable] {
        guard case .table(let users) = value else {
            throw ConfigError(origin: origin(line), reason: #"quota: expected tables such as [quota."alice"], found \#(value.typeName)"#)
        }
        var found: [QuotaTable] = []
        for entry in users.entries {
            let place = origin(entry.line)
            let title = "[quota.\"\(EchoedText.cut(entry.key, limit: 64))\"]"
            let uid: UInt32
            do {
                uid = try resolve(entry.key)
            } catch {
                throw ConfigError(origin: place, reason: "\(title): \(error.reason)")
            }
            if let other = found.first(where: { $0.uid == uid }) {
                throw ConfigError(origin: place, reason: "\(title): a second table for uid \(uid) (see [quota.\"\(other.name)\"])")
            }
            guard case .table(let table) = entry.value else {
                throw ConfigError(origin: place, reason: "\(title): expected a table with limit = \"SIZE\", found \(entry.value.typeName)")
            }
            var limit: Int??
            for setting in table.entries {
                guard setting.key == "limit" else {
                    throw ConfigError(
                        origin: origin(setting.line),
                        reason: "unknown setting \(EchoedText.cut(setting.key, limit: 64)) in \(title) (known: \(keys.joined(separator: ", ")))")
                }
                do {
                    limit = .some(try Self.limit(setting.value))
                } catch {
                    throw ConfigError(origin: origin(setting.line), reason: "\(title) limit: \(error.reason)")
                }
            }
            guard let limit else {
                throw ConfigError(origin: place, reason: "\(title): no limit (write limit = \"SIZE\", or \"none\" for no limit)")
            }
            found.append(QuotaTable(name: entry.key, uid: uid, limit: limit))
        }
        return found
    }

    /// `uid:N` as the uid N; any other name as a user of the password database.
    static func resolve(_ name: String) throws(SettingError) -> UInt32 {
        if name.hasPrefix("uid:") {
            guard let uid = UInt32(name.dropFirst(4)), uid != .max else {
                throw SettingError(reason: "\(EchoedText.cut(name, limit: 64)) is not uid:N with N a uid (0 to 4294967294)")
            }
            return uid
        }
        guard !name.isEmpty, let uid = try UserAccount.uid(named: name) else {
            throw SettingError(reason: "no user named \(EchoedText.cut(name, limit: 64)) (see /etc/passwd; or write uid:N)")
        }
        return uid
    }

    /// How a reload logs the tables.
    static func summary(_ tables: [QuotaTable]) -> String {
        guard !tables.isEmpty else { return "none" }
        return tables.map { "\($0.name) (uid \($0.uid)): \($0.limit.map { "\(ByteCount($0))" } ?? "none")" }.joined(separator: "; ")
    }
}
