/// What `--help` and docs/settings.md say of one setting (see ``DaemonSetting``): the part written by
/// hand, around the default the declaration derives from the value.
struct SettingHelp: Sendable {
    /// What it sets: one sentence without its default or a final period.
    var summary: String
    /// What `--help` says after the default; nil for nothing.
    var detail: String?
    /// The placeholder `--help` shows for the value; nil for the flag's own name.
    var valueName: String?
    /// What having no value means.
    var none = "none"

    init(_ summary: String, detail: String? = nil, valueName: String? = nil, none: String = "none") {
        self.summary = summary
        self.detail = detail
        self.valueName = valueName
        self.none = none
    }
}

extension SettingHelp: ExpressibleByStringLiteral {
    /// A summary alone.
    init(stringLiteral summary: String) {
        self.init(summary)
    }
}
