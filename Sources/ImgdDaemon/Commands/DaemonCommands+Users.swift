import ImgdCore
import ImgdProtocol
import ImgdStore

extension DaemonCommands {
    /// `status.users`: per uid charged with entries (and per uid with a quota table), its name
    /// when the password database has one, the bytes and entries charged to it, its pinned bytes
    /// and its limit (null: none); then a row with a null uid for the unowned entries, charged to
    /// nobody, when there are any. Exact: read from the index's per-owner totals (kept by
    /// triggers) and the pinned rows, no scan of the table.
    func users() -> JSONValue {
        let config = services.config.withLock { $0 }
        let quotas = services.disk.quotas
        let now = WallClock.nowMilliseconds()
        let usage = (try? services.disk.index.ownerUsage(now: now)) ?? []
        var byOwner = Dictionary(uniqueKeysWithValues: usage.map { ($0.owner, $0) })
        for table in config.quotaTables where byOwner[table.uid] == nil { byOwner[table.uid] = OwnerUsage(owner: table.uid) }
        var rows: [JSONValue] = byOwner.keys.sorted().map { uid in
            let figures = byOwner[uid]!
            let name = config.quotaTables.first { $0.uid == uid && !$0.name.hasPrefix("uid:") }?.name ?? UserAccount.name(of: uid)
            return [
                "uid": JSONValue(Int(uid)), "name": name.map { .string($0) } ?? .null,
                "bytes": JSONValue(figures.bytes), "entries": JSONValue(figures.entries), "pinned_bytes": JSONValue(figures.pinnedBytes),
                "limit": quotas.limit(for: uid).map { JSONValue($0) } ?? .null,
            ]
        }
        let totals = (try? services.disk.index.totals()) ?? (entries: 0, bytes: 0)
        let owned = usage.reduce((entries: 0, bytes: 0)) { ($0.entries + $1.entries, $0.bytes + $1.bytes) }
        if totals.entries > owned.entries {
            let pinned = (try? services.disk.index.pinnedBytes(now: now)) ?? 0
            let ownedPinned = usage.reduce(0) { $0 + $1.pinnedBytes }
            rows.append([
                "uid": .null, "name": .null, "bytes": JSONValue(totals.bytes - owned.bytes),
                "entries": JSONValue(totals.entries - owned.entries), "pinned_bytes": JSONValue(max(0, pinned - ownedPinned)),
                "limit": .null,
            ])
        }
        return .array(rows)
    }
}
