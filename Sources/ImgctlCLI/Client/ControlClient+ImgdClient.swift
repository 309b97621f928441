import ImgdClient
import ImgdProtocol

/// The names imgctl's commands have always used for the client, now ImgdClient's types.
typealias ControlReply = ImgdReply
typealias ControlEvent = ImgdEvent
typealias ControlMessage = ImgdMessage

/// imgctl's connection: ImgdClient's blocking ``ImgdConnection`` with its errors as
/// ``ImgctlError``s (which carry imgctl's exit statuses).
final class ControlClient {
    static let maximumLineLength = ImgdConnection.maximumLineLength
    typealias EventWait = ImgdConnection.EventWait

    let connection: ImgdConnection
    var socketPath: String { connection.socketPath }
    var keptEventLimit: Int { connection.keptEventLimit }

    /// Connects to the Unix stream socket at `path`; throws ``ImgctlError/unreachable(socket:reason:errno:)``.
    init(connectingTo path: String, keptEventLimit: Int = 10_000) throws(ImgctlError) {
        connection = try Self.mapped { () throws(ImgdClientError) in try ImgdConnection(connectingTo: path, keptEventLimit: keptEventLimit) }
    }

    func close() { connection.close() }

    func request(_ command: String, _ arguments: [String: JSONValue] = [:]) throws(ImgctlError) -> ControlReply {
        try Self.mapped { () throws(ImgdClientError) in try connection.request(command, arguments) }
    }

    @discardableResult
    func send(_ command: String, _ arguments: [String: JSONValue] = [:]) throws(ImgctlError) -> Int {
        try Self.mapped { () throws(ImgdClientError) in try connection.send(command, arguments) }
    }

    func awaitReply(id: Int) throws(ImgctlError) -> ControlReply {
        try Self.mapped { () throws(ImgdClientError) in try connection.awaitReply(id: id) }
    }

    func nextEvent(timeout: Duration?) throws(ImgctlError) -> EventWait {
        try Self.mapped { () throws(ImgdClientError) in try connection.nextEvent(timeout: timeout) }
    }

    /// The system's wording for an errno: "No such file or directory".
    static func describe(_ code: Int32) -> String {
        ImgdClientError.describe(code)
    }

    /// `body`'s result, its ``ImgdClientError`` thrown as imgctl's.
    static func mapped<T>(_ body: () throws(ImgdClientError) -> T) throws(ImgctlError) -> T {
        do throws(ImgdClientError) {
            return try body()
        } catch {
            throw ImgctlError(error)
        }
    }
}

extension ImgctlError {
    /// imgctl's error (and exit status) for a client error.
    init(_ error: ImgdClientError) {
        switch error {
        case .unreachable(let socket, let reason, let code): self = .unreachable(socket: socket, reason: reason, errno: code)
        case .connectionLost(let socket): self = .connectionLost(socket: socket)
        case .daemon(let code, let message): self = .daemon(code: code, message: message)
        case .badReply(let what): self = .badReply(what)
        case .local(let what): self = .local(what)
        case .descriptorLost(let socket):
            self = .local("imgd at \(socket) passed a descriptor this process could not take (out of descriptors?)")
        case .closed, .cancelled: self = .local("the connection was closed")
        }
    }
}

/// Where imgctl looks for the socket: now ImgdClient's, under the name imgctl always exported.
public typealias SocketPathResolver = ImgdClient.SocketPathResolver
