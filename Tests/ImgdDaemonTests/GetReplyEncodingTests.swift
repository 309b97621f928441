import ImgdCore
@testable import ImgdDaemon
import ImgdProtocol
@testable import ImgdStore
import NIOCore
import Testing

/// A `get` hit's reply is written straight into its line on the memory tier's fast path
/// (``DaemonCommands/writeJSON(_:source:data:into:)``, ``DaemonCommandHandler/replyAtOnce(_:)``):
/// these check it is, byte for byte, the line the `JSONValue` path writes for the same answer.
@Suite("get replies: the fast encoding writes the same bytes as the JSONValue encoding")
struct GetReplyEncodingTests {
    static func hit(path: String, width: Int?, height: Int?, bytes: [UInt8]?, source: CacheSource, format: ImageFormat) throws -> CacheHit {
        let url = try ImageURL("http://example.com/a.png")
        let entry = IndexEntry(
            key: url.cacheKey, url: url.normalized, bytes: bytes?.count ?? 1234, sha256: SHA256Digest(of: bytes ?? [1, 2, 3]),
            format: format, width: width, height: height, etag: nil, lastModified: nil, contentType: nil, fetchedAt: 1, lastAccess: 1)
        return CacheHit(entry: CachedEntry(entry: entry, path: path), bytes: bytes, source: source)
    }

    static func slow(_ hit: CacheHit, source: CacheSource, data: Bool) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeJSONValue(DaemonCommands.json(hit, source: source, data: data))
        return buffer
    }

    static func fast(_ hit: CacheHit, source: CacheSource, data: Bool) -> ByteBuffer {
        var buffer = ByteBuffer()
        DaemonCommands.writeJSON(hit, source: source, data: data, into: &buffer)
        return buffer
    }

    @Test(
        "every field, present or null, paths needing escapes, with and without data, each source",
        arguments: [
            ("/var/cache/imgd/ab/cd/abcdef", 640, 480, nil),
            ("/tmp/a \"quoted\" \\ back\nslash\t/é/日本", nil, nil, [UInt8]([0, 1, 2, 250, 251])),
            ("", 0, nil, [UInt8]()),
            ("/x", Int.max, -1, [UInt8](repeating: 7, count: 100)),
        ] as [(String, Int?, Int?, [UInt8]?)])
    func sameBytes(_ path: String, _ width: Int?, _ height: Int?, _ bytes: [UInt8]?) throws {
        for source in [CacheSource.memory, .disk, .network] {
            for format in [ImageFormat.png, .jpeg, .svg] {
                let hit = try Self.hit(path: path, width: width, height: height, bytes: bytes, source: source, format: format)
                for data in [false, true] {
                    let slow = Self.slow(hit, source: source, data: data)
                    let fast = Self.fast(hit, source: source, data: data)
                    #expect(String(buffer: fast) == String(buffer: slow), "source \(source), format \(format), data \(data)")
                }
            }
        }
    }

    @Test("a whole reply line: the envelope around an encoded result is the envelope around its value", arguments: [
        JSONValue.null, 0, -7, 9_007_199_254_740_993, "an \"id\"\n", 1.5, ["a": [1, "b"]], true,
    ] as [JSONValue])
    func sameLine(_ id: JSONValue) throws {
        let hit = try Self.hit(path: "/p", width: 1, height: 2, bytes: [9], source: .memory, format: .png)
        let slow = ControlLine.reply(id: id, .success(DaemonCommands.json(hit, source: .memory, data: true)))
        let fast = ControlLine.reply(id: id) { line in DaemonCommands.writeJSON(hit, source: .memory, data: true, into: &line) }
        #expect(String(buffer: fast) == String(buffer: slow))
    }
}
