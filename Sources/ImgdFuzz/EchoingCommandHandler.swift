import ImgdCore
import ImgdDaemon
import ImgdProtocol

/// The control-line target's command handler: it reads each request's arguments with the
/// accessors the daemon's commands use (strings, booleans, integers in a range, choices, URLs,
/// durations) and answers with the arguments echoed back, or with the first argument error
/// for a command named `fail`. It answers at once, so the whole exchange stays on the
/// embedded channel's thread.
final class EchoingCommandHandler: ControlCommandHandler {
    /// The member of a reply's result that holds the echoed arguments.
    static let echoKey = "echo"

    private let requests = Locked<[JSONValue]>([])

    /// The arguments of each request answered with an echo, in order.
    var answered: [JSONValue] { requests.withLock { $0 } }

    func handle(_ request: ControlRequest) async -> Result<JSONValue, ControlError> {
        answer(request)
    }

    func answerAtOnce(_ request: ControlRequest) -> Result<JSONValue, ControlError>? {
        answer(request)
    }

    private func answer(_ request: ControlRequest) -> Result<JSONValue, ControlError> {
        let firstError = readArguments(of: request)
        if request.command == "fail", let firstError {
            return .failure(firstError)
        }
        let arguments = JSONValue.object(request.arguments)
        requests.withLock { $0.append(arguments) }
        return .success([Self.echoKey: arguments])
    }

    /// Reads every argument as each kind the daemon asks for; the first error met.
    private func readArguments(of request: ControlRequest) -> ControlError? {
        var firstError: ControlError?
        func attempt(_ read: () throws(ControlError) -> Void) {
            do { try read() } catch { firstError = firstError ?? error }
        }
        for field in request.arguments.keys.sorted() {
            attempt { () throws(ControlError) in _ = try request.optionalString(field) }
            attempt { () throws(ControlError) in _ = try request.bool(field, default: false) }
            attempt { () throws(ControlError) in _ = try request.optionalStrings(field) }
            attempt { () throws(ControlError) in _ = try request.optionalInt(field, in: 1...1000) }
            attempt { () throws(ControlError) in _ = try request.choice(field, of: ["memory", "disk", "all"], default: "all") }
            attempt { () throws(ControlError) in _ = try request.optionalObject(field) }
            if let text = request.value(field)?.stringValue {
                attempt { () throws(ControlError) in
                    do { _ = try ImageURL(text) } catch { throw ControlError.invalidArgument(field: field, reason: "\(error)") }
                }
                attempt { () throws(ControlError) in
                    do { _ = try Duration.parsing(text) } catch { throw ControlError.invalidArgument(field: field, reason: "\(error)") }
                }
            }
            for text in request.value(field)?.arrayValue?.compactMap(\.stringValue) ?? [] {
                attempt { () throws(ControlError) in
                    do { _ = try ImageURL(text) } catch { throw ControlError.invalidArgument(field: field, reason: "\(error)") }
                }
            }
        }
        return firstError
    }
}
