import ImgdProtocol

/// A line from the daemon: a reply to a request, or an event.
public enum ImgdMessage {
    case reply(ImgdReply)
    case event(ImgdEvent)

    /// Reads one line; throws ``ImgdClientError/badReply(_:)`` for anything that is neither.
    public init(line: [UInt8]) throws(ImgdClientError) {
        let raw = String(decoding: line, as: UTF8.self)
        guard let value = (try? JSONValue(parsing: line)), case .object(let members) = value else {
            throw .badReply("not a JSON object: \(ImgdMessage.excerpt(raw))")
        }
        if let name = members["event"]?.stringValue {
            self = .event(
                ImgdEvent(
                    name: name, seq: members["seq"]?.intValue ?? 0, data: members["data"] ?? .object([:]), raw: raw))
            return
        }
        guard let ok = members["ok"]?.boolValue else {
            throw .badReply("neither a reply nor an event: \(ImgdMessage.excerpt(raw))")
        }
        var reply = ImgdReply(id: members["id"] ?? .null, result: members["result"] ?? .null, error: nil, raw: raw)
        if !ok {
            let error = members["error"]
            reply.error = (
                code: error?["code"]?.stringValue ?? "error",
                message: error?["message"]?.stringValue ?? "(no message)"
            )
        }
        self = .reply(reply)
    }

    /// The start of a long line, for an error message.
    public static func excerpt(_ text: String) -> String {
        text.count <= 200 ? text : String(text.prefix(200)) + "…"
    }
}
