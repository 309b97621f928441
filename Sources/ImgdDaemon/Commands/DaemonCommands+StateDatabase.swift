import ImgdCore
import ImgdStore
import Logging
import Synchronization

/// When a command last logged a failure of the state database (seconds since 1970): such
/// failures are logged at most once a minute, however often clients ask meanwhile (a script
/// polling `lists` every second during an outage would otherwise write a line a second; the
/// spool logs the outage itself once).
private let lastStateFailureLogged = Atomic<Int>(0)

extension DaemonCommands {
    /// `body`'s answer, or `state_unavailable` when the state database failed under it (logged
    /// with the command's peer, at most once a minute: the operator sees the cause, the client
    /// what to do).
    func fromStateDatabase<Answer>(_ what: String, _ body: () async throws(SQLiteError) -> Answer) async throws(ControlError) -> Answer {
        do {
            return try await body()
        } catch {
            let now = WallClock.nowMilliseconds() / 1000
            let last = lastStateFailureLogged.load(ordering: .relaxed)
            if now - last >= 60, lastStateFailureLogged.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged {
                peerLogger.error("the state database failed while \(what): \(error) (logged at most once a minute)")
            }
            throw .stateUnavailable(what: what, cause: "\(error)")
        }
    }
}
