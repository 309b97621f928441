import ImgdProtocol

/// A subcommand's connection: resolves the socket, connects, and turns replies into results —
/// printing each reply line raw with `--json`, throwing ``ImgctlError/daemon(code:message:)``
/// for an error reply.
final class ControlSession {
    let client: ControlClient
    let context: ImgctlContext
    /// `--json`: print reply lines as received.
    let json: Bool

    init(_ options: ConnectionOptions, context: ImgctlContext) throws(ImgctlError) {
        let path = SocketPathResolver.resolve(
            flag: options.socket, environment: context.environment, exists: context.fileExists)
        client = try ControlClient(connectingTo: path)
        self.context = context
        json = options.json
    }

    /// Sends `command` and returns its `result`. With `--json` the reply line goes to stdout
    /// unless `echo` is false (the caller prints something else instead).
    @discardableResult
    func call(_ command: String, _ arguments: [String: JSONValue] = [:], echo: Bool = true) throws(ImgctlError)
        -> JSONValue
    {
        try reply(command, arguments, echo: echo).result
    }

    /// Sends `command` and returns its successful reply; an error reply is thrown (and, with
    /// `--json`, printed first, whatever `echo` says).
    func reply(_ command: String, _ arguments: [String: JSONValue] = [:], echo: Bool = true) throws(ImgctlError)
        -> ControlReply
    {
        let reply = try client.request(command, arguments)
        if let error = reply.error {
            if json { context.standardOutput.line(reply.raw) }
            throw .daemon(code: error.code, message: error.message)
        }
        if json, echo { context.standardOutput.line(reply.raw) }
        return reply
    }

    /// Writes a line to stdout.
    func output(_ text: String) {
        context.standardOutput.line(text)
    }

    /// Writes a line to stderr.
    func warn(_ text: String) {
        context.standardError.line(text)
    }
}
