import ArgumentParser
import ImgdBase
import ImgdProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `imgctl wait-ready`: waits until imgd's hot set (`ready-lists`) is cached well enough
/// (`status.ready`), for `imgd-ready.service` and deploy scripts. Exit 0 ready, 1 not ready
/// when `--timeout` passed (the daemon's `not_ready`, naming what is missing), 3 unreachable.
struct WaitReadyCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "wait-ready",
        abstract: "Wait until the daemon's ready lists are cached (exit 0), or until --timeout (exit 1).",
        discussion: """
            Readiness is reached once every list of the ready-lists setting has been read and \
            ready-fraction of their entries are cached (failed ones count against it); with no \
            ready-lists, at once. It is kept for the rest of the daemon's run. While the socket \
            is missing or refuses connections (imgd still starting), or answers busy (this uid \
            holds its last connection), this tries again every 100 ms, for at most --timeout \
            (30 s without one), then exits 3 (busy: 1). It polls \
            nothing else: the daemon answers when ready. Exit status: 0 ready; 1 not ready when \
            --timeout passed (`imgctl: not_ready: …` names what is missing); 3 the daemon cannot \
            be reached, or it stopped while this waited.
            """)

    /// How long connecting is retried without a --timeout.
    static let defaultConnectWindow = Duration.seconds(30)

    @Option(help: ArgumentHelp("Give up after this long: 30s, 10m, 1h (at most 1d). Default: wait until ready.", valueName: "duration"))
    var timeout: String?

    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        _ = try parsedTimeout()
    }

    private func parsedTimeout() throws -> Duration? {
        guard let timeout else { return nil }
        guard let duration = try? Duration.parsing(timeout), duration >= .zero, duration <= .seconds(86_400) else {
            throw ValidationError("--timeout: a duration such as 30s, 10m or 1h, at most 1d")
        }
        return duration
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let timeout = try? parsedTimeout()
        let clock = ContinuousClock()
        let started = clock.now
        let deadline = started + (timeout ?? Self.defaultConnectWindow)
        var session: ControlSession
        let result: JSONValue
        while true {
            session = try Self.connect(connection, context: context, until: deadline)
            var arguments: [String: JSONValue] = [:]
            if let timeout {
                let left = max(.zero, timeout - (clock.now - started))
                arguments["timeout"] = JSONValue(Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18)
            }
            do {
                result = try session.call("wait-ready", arguments)
                break
            } catch .daemon(code: "shutting_down", _) {
                // imgd stopped before it was ready: as unreachable, not as "not ready in time".
                throw .connectionLost(socket: session.client.socketPath)
            } catch .daemon(code: "busy", let message) {
                // Refused over a connection cap (another client of this uid holds the last
                // slot): a waiting command tries again, as it does while imgd starts.
                guard clock.now < deadline else { throw .daemon(code: "busy", message: message) }
                Self.pause()
            }
        }
        guard !session.json else { return }
        let cached = result["cached"]?.intValue ?? 0, total = result["total"]?.intValue ?? 0
        session.output("ready: \(HumanFormat.count(cached)) of \(HumanFormat.count(total)) URLs cached")
    }

    /// A session, retrying while the socket is missing or refuses (the daemon is starting) until `deadline`.
    /// (A `busy` refusal, which comes with the first reply, is retried by the caller.)
    static func connect(_ options: ConnectionOptions, context: ImgctlContext, until deadline: ContinuousClock.Instant) throws(ImgctlError)
        -> ControlSession
    {
        while true {
            do {
                return try ControlSession(options, context: context)
            } catch .unreachable(let socket, let reason, let code) where code == ENOENT || code == ECONNREFUSED {
                guard ContinuousClock.now < deadline else { throw .unreachable(socket: socket, reason: reason, errno: code) }
                pause()
            }
        }
    }

    /// 100 ms between two tries (a blocking sleep: imgctl runs no concurrency runtime).
    static func pause() {
        var pause = timespec(tv_sec: 0, tv_nsec: 100_000_000), left = timespec()
        while nanosleep(&pause, &left) != 0, errno == EINTR { pause = left }
    }
}
