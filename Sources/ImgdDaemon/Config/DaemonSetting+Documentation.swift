extension DaemonSetting {
    /// The environment systemd gives the service, with each folder named by its variable, so
    /// a default under systemd reads `$STATE_DIRECTORY/spool`.
    static let systemdPlaceholders = [
        "STATE_DIRECTORY": "$STATE_DIRECTORY", "CACHE_DIRECTORY": "$CACHE_DIRECTORY", "RUNTIME_DIRECTORY": "$RUNTIME_DIRECTORY",
    ]

    /// The embedded defaults, outside systemd and under it, made once: every option's help
    /// reads them, and swift-argument-parser makes each command's options (and so their help)
    /// several times per start, `imgd prefetch`'s and the default command's alike.
    private static let embeddedDefaults = (
        plain: DaemonConfig.embedded(environment: [:]), systemd: DaemonConfig.embedded(environment: systemdPlaceholders))

    /// The default as a flag spells it (`1GiB`, `7d`, `./imgd-data/spool`); nil when there is none.
    public var defaultSpelling: String? {
        spell(Self.embeddedDefaults.plain)
    }

    /// The default under systemd when it differs (`$STATE_DIRECTORY/spool`); nil otherwise.
    public var systemdDefaultSpelling: String? {
        let underSystemd = spell(Self.embeddedDefaults.systemd)
        return underSystemd == defaultSpelling ? nil : underSystemd
    }

    /// What `--help` says of it: "The cache's size cap (default 1GiB; KiB, MiB, GiB, KB, MB, GB, or bytes)."
    public var help: String {
        help(underSystemd: true)
    }

    /// ``help``, with the default under systemd only when `underSystemd` (a command that does
    /// not read systemd's folders, as `imgd prefetch`, leaves it out).
    public func help(underSystemd: Bool) -> String {
        var shown = defaultSpelling ?? none
        if underSystemd, let systemd = systemdDefaultSpelling { shown += ", under systemd \(systemd)" }
        return "\(summary) (default \(shown)\(detail.map { "; \($0)" } ?? ""))."
    }

    /// Its row of the table of settings (docs/settings.md): name, default, what SIGHUP does, what it sets.
    public var markdownRow: String {
        var shown = defaultSpelling.map { "`\($0)`" } ?? none
        if let systemd = systemdDefaultSpelling { shown += " (`\(systemd)` under systemd)" }
        let what = summary + (detail.map { " (\($0))" } ?? "")
        return "| `\(name)` | \(shown) | \(reloadable ? "applied" : "restart") | \(what) |"
    }
}

extension DaemonConfig {
    /// The setting named `name` (flag or key); nil for none.
    public static func setting(named name: String) -> DaemonSetting? {
        settings.first { $0.name == name }
    }

    /// The settings a reload applies at once, in `--help` order.
    public static var reloadableSettingNames: [String] {
        settings.filter(\.reloadable).map(\.name)
    }

    /// The settings a reload leaves at their running value until a restart, in `--help` order.
    public static var restartSettingNames: [String] {
        settings.filter { !$0.reloadable }.map(\.name)
    }

    /// The table of settings in docs/settings.md, as the declarations give it (a test checks the file holds it).
    public static var settingsMarkdownTable: String {
        (["| setting | default | SIGHUP | what it sets |", "|---|---|---|---|"] + settings.map(\.markdownRow))
            .joined(separator: "\n")
    }
}
