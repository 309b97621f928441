/// Finds the control socket to connect to, in order: `--socket`, `$IMGD_SOCKET`, the daemon's
/// embedded default `./imgd-data/imgd.sock` when something is there, and the systemd location
/// `/run/imgd/imgd.sock`.
///
/// The embedded default is tried only when it exists, because a daemon started by hand in this
/// folder is the likelier target than the system one; otherwise the system socket is the
/// answer, so the "cannot reach" message names the place a packaged imgd listens on.
public enum SocketPathResolver {
    /// The environment variable that names the socket.
    public static let environmentVariable = "IMGD_SOCKET"
    /// Where `imgd` listens when started without options, relative to its working directory.
    public static let embeddedDefault = "./imgd-data/imgd.sock"
    /// Where the packaged `imgd` listens (`$RUNTIME_DIRECTORY/imgd.sock` under systemd).
    public static let systemDefault = "/run/imgd/imgd.sock"

    /// The socket path: the flag, else the environment (when not empty), else the embedded
    /// default if `exists` says it is there, else the system default.
    public static func resolve(
        flag: String?, environment: [String: String], exists: (String) -> Bool
    ) -> String {
        if let flag, !flag.isEmpty { return flag }
        if let fromEnvironment = environment[environmentVariable], !fromEnvironment.isEmpty {
            return fromEnvironment
        }
        if exists(embeddedDefault) { return embeddedDefault }
        return systemDefault
    }
}
