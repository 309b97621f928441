import ImgdCore
import ImgdProtocol
import ImgdStore
import NIOCore

extension DaemonCommands {
    /// Writes ``json(_:source:data:)``'s object for `hit` as JSON, byte for byte what
    /// `writeJSONValue` writes for it, without building the dictionary and sorting its keys
    /// (on the path of every memory hit, where that was a fifth of the cost, measured). The keys
    /// are written in the order `writeJSONValue` sorts them (by their UTF-8 bytes): `bytes`,
    /// `data`, `format`, `height`, `path`, `sha256`, `source`, `width`.
    /// DaemonCommandHandlerTests checks the two agree.
    static func writeJSON(_ hit: CacheHit, source: CacheSource, data: Bool, into line: inout ByteBuffer) {
        let entry = hit.entry.entry
        line.writeStaticString("{\"bytes\":")
        line.writeJSONValue(JSONValue(entry.bytes))
        if data, let bytes = hit.bytes {
            line.writeStaticString(",\"data\":")
            line.writeJSONString(Base64.encode(bytes))
        }
        line.writeStaticString(",\"format\":")
        line.writeJSONString(entry.format.rawValue)
        line.writeStaticString(",\"height\":")
        line.writeJSONValue(entry.height.map { JSONValue($0) } ?? .null)
        line.writeStaticString(",\"path\":")
        line.writeJSONString(hit.entry.path)
        // Hex digits need no escape: written in place, with no String made of them.
        line.writeStaticString(",\"sha256\":\"")
        line.writeWithUnsafeMutableBytes(minimumWritableBytes: 64) { out in
            entry.sha256.writeHex(into: out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            return 64
        }
        line.writeStaticString("\"")
        line.writeStaticString(",\"source\":")
        line.writeJSONString(source.rawValue)
        line.writeStaticString(",\"width\":")
        line.writeJSONValue(entry.width.map { JSONValue($0) } ?? .null)
        line.writeStaticString("}")
    }
}
