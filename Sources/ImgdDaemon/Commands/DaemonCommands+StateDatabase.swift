import ImgdStore
import Logging

extension DaemonCommands {
    /// `body`'s answer, or `state_unavailable` when the state database failed under it (logged
    /// with the command's peer: the operator sees the cause, the client what to do).
    func fromStateDatabase<Answer>(_ what: String, _ body: () async throws(SQLiteError) -> Answer) async throws(ControlError) -> Answer {
        do {
            return try await body()
        } catch {
            peerLogger.error("the state database failed while \(what): \(error)")
            throw .stateUnavailable(what: what, cause: "\(error)")
        }
    }
}
