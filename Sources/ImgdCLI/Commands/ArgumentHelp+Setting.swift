import ArgumentParser
import ImgdDaemon

extension ArgumentHelp {
    /// The help of the daemon's setting `name`, as ``DaemonConfig/settings`` declares it: its
    /// summary, its default (from the value; under systemd too unless `underSystemd` is false)
    /// and its placeholder.
    static func setting(_ name: String, underSystemd: Bool = true) -> ArgumentHelp {
        guard let setting = DaemonConfig.setting(named: name) else { preconditionFailure("no setting named \(name)") }
        return ArgumentHelp(setting.help(underSystemd: underSystemd), valueName: setting.valueName)
    }
}
