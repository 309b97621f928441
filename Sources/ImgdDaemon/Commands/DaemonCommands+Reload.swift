import ImgdProtocol

extension DaemonCommands {
    /// `reload`: reads the configuration again and applies it, as SIGHUP does, and answers once it
    /// has: the lines the reload logged, or `reload_failed` naming the cause (the running settings
    /// stay). The unit's `ExecReload=` runs `imgctl reload`, so `systemctl reload imgd` waits for
    /// the outcome and fails with it (SIGHUP, a signal, cannot answer). Privileged: a reload
    /// changes what every user gets, and a reload that fails marks the daemon degraded.
    func reload() async throws(ControlError) -> JSONValue {
        try requirePrivilege(for: "reload")
        logChange("reload")
        do {
            let told = try await services.reload()
            return ["reloaded": true, "messages": .array(told.map { .string($0) })]
        } catch {
            throw .other(code: ReloadFailure.code, message: "\(error)")
        }
    }
}
