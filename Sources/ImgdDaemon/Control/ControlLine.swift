import ImgdProtocol
import NIOCore

/// The lines the server writes, each one JSON object and a `\n` (Protocol.md, *Requests and
/// replies*). Replies have their keys sorted; event lines read `event`, `seq`, `data`.
enum ControlLine {
    /// `{"id":…,"ok":true,"result":…}` or `{"error":{"code":…,"message":…},"id":…,"ok":false}`.
    static func reply(id: JSONValue, _ outcome: Result<JSONValue, ControlError>) -> ByteBuffer {
        // Room for a typical reply (a `get` hit is about 300 bytes) without growing it. The
        // envelope is written directly, its keys in sorted order, rather than built as an
        // object first: it is on the path of every request.
        var line = ControlLine.allocator.buffer(capacity: 512)
        switch outcome {
        case .success(let result):
            line.writeStaticString("{\"id\":")
            line.writeJSONValue(id)
            line.writeStaticString(",\"ok\":true,\"result\":")
            line.writeJSONValue(result)
        case .failure(let error):
            line.writeStaticString("{\"error\":{\"code\":")
            line.writeJSONString(error.code)
            line.writeStaticString(",\"message\":")
            line.writeJSONString(error.message)
            line.writeStaticString("},\"id\":")
            line.writeJSONValue(id)
            line.writeStaticString(",\"ok\":false")
        }
        line.writeStaticString("}\n")
        return line
    }

    /// A success reply whose `result` `writeResult` writes as JSON: the same line as
    /// ``reply(id:_:)`` with `.success`, for a result encoded without a `JSONValue`.
    static func reply(id: JSONValue, writingResult writeResult: (inout ByteBuffer) -> Void) -> ByteBuffer {
        var line = ControlLine.allocator.buffer(capacity: 512)
        line.writeStaticString("{\"id\":")
        line.writeJSONValue(id)
        line.writeStaticString(",\"ok\":true,\"result\":")
        writeResult(&line)
        line.writeStaticString("}\n")
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
