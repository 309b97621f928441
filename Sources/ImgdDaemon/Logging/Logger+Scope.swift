import Logging

extension Logger {
    /// This logger with `list=NAME` on every line: what is said about one list. The text then
    /// says what happened, not which list (the handler appends the metadata, so one grep for
    /// `list=NAME` finds every line about it).
    func forList(_ name: String) -> Logger {
        var scoped = self
        scoped[metadataKey: "list"] = "\(name)"
        return scoped
    }

    /// This logger with `peer=…` (pid, uid, gid) on every line: what one client did or was
    /// refused.
    func forPeer(_ peer: some CustomStringConvertible) -> Logger {
        var scoped = self
        scoped[metadataKey: "peer"] = "\(peer)"
        return scoped
    }
}
