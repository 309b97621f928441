import ImgdCore
import ImgdProtocol
import ImgdStore

/// One line of a warm set's manifest (`imgd-manifest.jsonl`, Protocol.md "Carrying the warm
/// set"): what the index keeps of an entry, so an importing daemon records the same row (its
/// freshness and validators included) and never asks the origin for it again.
struct WarmSetManifestRow: Sendable, Equatable {
    /// The name of the archive's first member.
    static let memberName = "imgd-manifest.jsonl"

    var entry: IndexEntry

    /// The archive member that holds the entry's bytes: its key in hexadecimal.
    var memberName: String { entry.key.hex }

    /// The line's JSON object; members without a value are left out.
    var json: JSONValue {
        var members: [String: JSONValue] = [
            "key": .string(entry.key.hex),
            "url": .string(entry.url),
            "sha256": .string(entry.sha256.hex),
            "format": .string(entry.format.rawValue),
            "bytes": JSONValue(entry.bytes),
            "fetched_at": JSONValue(entry.fetchedAt),
            "validated_at": JSONValue(entry.freshness.validatedAt),
        ]
        if let width = entry.width { members["width"] = JSONValue(width) }
        if let height = entry.height { members["height"] = JSONValue(height) }
        if let etag = entry.etag { members["etag"] = .string(etag) }
        if let lastModified = entry.lastModified { members["last_modified"] = .string(lastModified) }
        if let contentType = entry.contentType { members["content_type"] = .string(contentType) }
        if let freshUntil = entry.freshness.freshUntil { members["fresh_until"] = JSONValue(freshUntil) }
        if entry.freshness.noCache { members["no_cache"] = true }
        if entry.freshness.immutable { members["immutable"] = true }
        return .object(members)
    }

    init(entry: IndexEntry) {
        self.entry = entry
    }

    /// A row read from an archive's manifest; `line` counts from 1, for messages.
    init(json value: JSONValue, line: Int, now: Int) throws(WarmSetError) {
        guard let members = value.objectValue else { throw .badManifest(line: line, reason: "not a JSON object") }
        func text(_ name: String) throws(WarmSetError) -> String {
            guard let value = members[name]?.stringValue else { throw .badManifest(line: line, reason: "\"\(name)\" is missing or not a string") }
            return value
        }
        func optionalText(_ name: String) throws(WarmSetError) -> String? {
            guard let value = members[name], !value.isNull else { return nil }
            guard let text = value.stringValue else { throw .badManifest(line: line, reason: "\"\(name)\" is not a string") }
            return text
        }
        func number(_ name: String, required: Bool = true) throws(WarmSetError) -> Int? {
            guard let value = members[name], !value.isNull else {
                if required { throw .badManifest(line: line, reason: "\"\(name)\" is missing") }
                return nil
            }
            guard let number = value.intValue, number >= 0 else { throw .badManifest(line: line, reason: "\"\(name)\" is not a whole number ≥ 0") }
            return number
        }
        guard let digest = SHA256Digest(hex: try text("key")) else { throw .badManifest(line: line, reason: "\"key\" is not 64 hexadecimal digits") }
        guard let sha256 = SHA256Digest(hex: try text("sha256")) else { throw .badManifest(line: line, reason: "\"sha256\" is not 64 hexadecimal digits") }
        let formatText = try text("format")
        guard let format = ImageFormat(rawValue: formatText) else { throw .badManifest(line: line, reason: "\"format\" \(EchoedText.cut(formatText)) is not an image format imgd knows") }
        let url = try text("url")
        guard (try? ImageURL(url)) != nil else { throw .badManifest(line: line, reason: "\"url\" \(EchoedText.cut(url)) is not an http(s) URL") }
        let fetchedAt = try number("fetched_at")!
        let freshness = EntryFreshness(
            validatedAt: try number("validated_at", required: false) ?? fetchedAt,
            freshUntil: try number("fresh_until", required: false),
            noCache: members["no_cache"]?.boolValue ?? false, immutable: members["immutable"]?.boolValue ?? false)
        entry = IndexEntry(
            key: CacheKey(digest: digest), url: url, bytes: try number("bytes")!, sha256: sha256, format: format,
            width: try number("width", required: false), height: try number("height", required: false),
            etag: try optionalText("etag"), lastModified: try optionalText("last_modified"),
            contentType: try optionalText("content_type"), fetchedAt: fetchedAt, lastAccess: now, freshness: freshness)
    }
}

/// Why an import or an export could not go on (Protocol.md "Carrying the warm set").
enum WarmSetError: Error, CustomStringConvertible {
    /// The archive's first member is not the manifest.
    case noManifest(found: String)
    /// A manifest line that is not a row.
    case badManifest(line: Int, reason: String)
    /// The manifest is over its limit.
    case manifestTooLarge(bytes: Int, limit: Int)
    /// The tar stream itself.
    case archive(TarError)

    var description: String {
        switch self {
        case .noManifest(let found): "the archive's first member is \(EchoedText.cut(found)), not \(WarmSetManifestRow.memberName) (not an imgd export)"
        case .badManifest(let line, let reason): "manifest line \(line): \(reason)"
        case .manifestTooLarge(let bytes, let limit): "the manifest is \(bytes) bytes, over the limit of \(limit)"
        case .archive(let error): error.description
        }
    }
}
