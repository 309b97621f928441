import NIOCore

/// The lines the server writes, each one JSON object and a `\n` (Protocol.md, *Requests and
/// replies*). Replies have their keys sorted; event lines read `event`, `seq`, `data`.
enum ControlLine {
    /// `{"id":…,"ok":true,"result":…}` or `{"error":{"code":…,"message":…},"id":…,"ok":false}`.
    static func reply(id: JSONValue, _ outcome: Result<JSONValue, ControlError>) -> ByteBuffer {
        let object: JSONValue
        switch outcome {
        case .success(let result):
            object = ["id": id, "ok": true, "result": result]
        case .failure(let error):
            object = ["id": id, "ok": false, "error": ["code": .string(error.code), "message": .string(error.message)]]
        }
        // Room for a typical reply (a `get` hit is about 300 bytes) without growing it.
        var line = ControlLine.allocator.buffer(capacity: 512)
        line.writeJSONValue(object)
        line.writeInteger(UInt8(ascii: "\n"))
        return line
    }

    private static let allocator = ByteBufferAllocator()

    /// A failure reply.
    static func error(_ error: ControlError, id: JSONValue = .null) -> ByteBuffer {
        reply(id: id, .failure(error))
    }

    /// The start of an event line, up to its sequence number: `{"event":"NAME","seq":`.
    static func eventHead(_ name: String) -> ByteBuffer {
        var head = ByteBuffer()
        head.writeStaticString("{\"event\":")
        head.writeJSONString(name)
        head.writeStaticString(",\"seq\":")
        return head
    }

    /// The rest of an event line after its sequence number: `,"data":DATA}\n`.
    static func eventTail(_ data: JSONValue) -> ByteBuffer {
        var tail = ByteBuffer()
        tail.writeStaticString(",\"data\":")
        tail.writeJSONValue(data)
        tail.writeStaticString("}\n")
        return tail
    }

    /// A whole event line.
    static func event(head: ByteBuffer, sequence: Int, tail: ByteBuffer) -> ByteBuffer {
        var line = ByteBuffer()
        line.reserveCapacity(head.readableBytes + 20 + tail.readableBytes)
        line.writeImmutableBuffer(head)
        line.writeString(String(sequence))
        line.writeImmutableBuffer(tail)
        return line
    }

    /// `{"event":"events_dropped","seq":N,"data":{"count":K}}`: `N` is the sequence number of
    /// the last event dropped, so the numbers a subscriber sees still only go up.
    static func eventsDropped(count: Int, lastSequence: Int) -> ByteBuffer {
        event(head: eventHead("events_dropped"), sequence: lastSequence, tail: eventTail(["count": JSONValue(count)]))
    }
}
