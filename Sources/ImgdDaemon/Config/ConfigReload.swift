import Logging

/// What a reload does with a configuration read again: each changed setting declared
/// reloadable is applied, each other one is logged as needing a restart and keeps its running
/// value. The daemon's reload logs ``messages`` and runs on ``applied``, so what it logs is
/// what it does.
public struct ConfigReload: Sendable {
    /// One setting whose value in the file (or flags) differs from the running one.
    public struct Change: Sendable, Equatable {
        public let key: String
        /// The new value, as logged.
        public let value: String
        /// True when the new value is applied now; false when it waits for a restart.
        public let applied: Bool
    }

    /// The changed settings, in `--help` order.
    public let changes: [Change]
    /// The configuration to run on: the loaded one's reloadable settings, the running one's others.
    public let applied: DaemonConfig

    public init(running: DaemonConfig, loaded: DaemonConfig) {
        var applied = running
        var changes: [Change] = []
        for setting in DaemonConfig.settings {
            if setting.reloadable { setting.adopt(&applied, loaded) }
            let new = setting.show(loaded)
            // Compared as spelled too: a shown value may hide a part (a proxy's password).
            guard new != setting.show(running) || setting.spell(loaded) != setting.spell(running) else { continue }
            changes.append(Change(key: setting.name, value: new, applied: setting.reloadable))
        }
        // Host tables come only from the file and always reload with it.
        if loaded.hosts != running.hosts {
            applied.hosts = loaded.hosts
            changes.append(Change(key: "host tables", value: HostSettings.summary(loaded.hosts), applied: true))
        }
        // So do the calendar windows.
        if loaded.windows != running.windows {
            applied.windows = loaded.windows
            changes.append(Change(key: "window tables", value: CalendarWindowTables.summary(loaded.windows), applied: true))
        }
        // So do quota tables; a user's name is resolved again at each load.
        if loaded.quotaTables != running.quotaTables {
            applied.quotaTables = loaded.quotaTables
            changes.append(Change(key: "quota tables", value: QuotaTable.summary(loaded.quotaTables), applied: true))
        }
        self.changes = changes
        self.applied = applied
    }

    /// The log lines, one per change ("nothing changed" when none).
    public var messages: [(text: String, level: Logger.Level)] {
        guard !changes.isEmpty else { return [("reloaded: nothing changed", .info)] }
        return changes.map { change in
            change.applied
                ? ("reloaded: \(change.key) = \(change.value)", .info)
                : ("reloaded: \(change.key) changed to \(change.value) but needs a restart; keeping the old value", .warning)
        }
    }
}
