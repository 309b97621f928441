import ArgumentParser

/// `imgctl reload`: the daemon reads its configuration again (as on SIGHUP) and answers with the
/// outcome; exits 1 when the configuration did not load. The unit's `ExecReload=`, so that
/// `systemctl reload imgd` reports a failed reload.
struct ReloadCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "reload",
        abstract: "Reload the daemon's configuration and wait for the outcome (exit 1 if it did not load).",
        discussion: """
            As SIGHUP does: the reloadable settings apply at once, the others are kept until a \
            restart (each change is printed as the daemon logs it). A configuration that no \
            longer loads (invalid TOML, a bad value, a headers-file open to others) leaves the \
            running settings in place, is printed with its cause, shows in `imgctl status` as \
            degraded (reload_failed) until a reload succeeds, and exits 1. Allowed to root, \
            imgd's own user and members of admin-group.
            """)

    @OptionGroup var connection: ConnectionOptions

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        let result = try session.call("reload")
        guard !session.json else { return }
        let messages = (result["messages"]?.arrayValue ?? []).compactMap(\.stringValue)
        if messages.isEmpty { session.output("reloaded: nothing changed") }
        for message in messages { session.output(HumanFormat.text(message)) }
    }
}
