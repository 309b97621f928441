/// A reload whose configuration did not load (invalid TOML, a bad value, a `headers-file` open to
/// others, a missing `ca-file`): the running settings stay. Shown in `status.degraded` as
/// `reload_failed` until a reload succeeds, answered to `reload` as that error (so `systemctl
/// reload`, whose `ExecReload=` runs `imgctl reload`, fails), and logged.
struct ReloadFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The code in `status.degraded` and in the `reload` command's error.
    static let code = "reload_failed"

    /// Why the configuration did not load, as the loader said it (`FILE:LINE: reason`).
    let cause: String

    var description: String { "reload failed, keeping the running configuration: \(cause)" }
}
