import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// `import`: reads a warm set's tar stream as it arrives and publishes each entry as a download
/// is published: into a temp file in the cache's folder, its SHA-256 compared with the
/// manifest's, the image validated, room made under the disk cap (evicting as for a download),
/// renamed to its key's name and recorded with the manifest's freshness and validators.
///
/// Members are matched to manifest rows by name (the key in hexadecimal); nothing in the stream
/// names a path on this machine. A member whose name is not in the manifest, that is not a
/// regular file, that came twice, or whose bytes or image do not check out is refused and its
/// bytes dropped; the stream goes on. A malformed header, a member over `max-size`, a bad
/// manifest or a truncated stream end the import: what was taken before stays taken.
///
/// One import at a time per connection; its calls come in order from ``ControlStreamHandler``.
actor WarmSetImport: ControlStreamSink {
    /// The largest manifest accepted (it is held in memory until the entries follow).
    static let maxManifestBytes = 64 * 1024 * 1024
    /// Outcomes listed by name in the reply, each kind (the counts are always complete).
    static let maxListed = 1_000

    private let disk: DiskCache
    private let memory: MemoryCache
    private let downloader: Downloader
    private let validator = ImageValidator(maxPixels: DownloadPolicy().maxPixels)
    /// Replace an entry cached with another digest (`"replace": true`).
    private let replace: Bool
    /// The importing peer's uid: who the taken entries are charged to (quotas per user), as a
    /// download is charged to its asker; an entry already cached keeps its owner.
    let owner: UInt32
    private let onEnd: @Sendable (_ summary: WarmSetImportSummary) -> Void

    private var reader: TarReader
    private var manifestText: [UInt8]?
    private var rows: [String: WarmSetManifestRow] = [:]
    private var sawManifest = false
    private var seen: Set<String> = []
    /// The member being written, or nil while a refused or skipped member's bytes are dropped.
    private var member: MemberWrite?
    /// Set at a refusal that ends the stream: nothing more is read.
    private var fatal: String?
    /// The cache refused room: every later entry is refused at once with the same reason.
    private var full = false
    private var summary = WarmSetImportSummary()

    /// One member on its way to the cache.
    private final class MemberWrite {
        let row: WarmSetManifestRow
        let file: TempFile
        var hasher = SHA256Hasher()
        var reserved: Int
        init(row: WarmSetManifestRow, file: TempFile, reserved: Int) {
            self.row = row
            self.file = file
            self.reserved = reserved
        }
    }

    /// What the reader found in one `feed`, acted on afterwards (room is awaited, which the
    /// reader's synchronous callback cannot do).
    private enum Step {
        case start(name: String, size: Int, isRegularFile: Bool)
        case data([UInt8])
        case end
    }

    init(
        disk: DiskCache, memory: MemoryCache, downloader: Downloader, maxMemberBytes: Int, replace: Bool, owner: UInt32,
        onEnd: @escaping @Sendable (WarmSetImportSummary) -> Void
    ) {
        self.disk = disk
        self.memory = memory
        self.downloader = downloader
        self.replace = replace
        self.owner = owner
        self.onEnd = onEnd
        reader = TarReader(maxMemberBytes: max(maxMemberBytes, Self.maxManifestBytes))
        self.maxMemberBytes = maxMemberBytes
    }

    private let maxMemberBytes: Int

    func consume(_ bytes: ByteBuffer) async {
        guard fatal == nil else { return }
        var steps: [Step] = []
        do {
            try bytes.withUnsafeReadableBytes { buffer in
                try reader.feed(buffer) { event in
                    switch event {
                    case .member(let name, let size, let isRegularFile): steps.append(.start(name: name, size: size, isRegularFile: isRegularFile))
                    case .data(let piece): steps.append(.data(Array(piece)))
                    case .memberEnd: steps.append(.end)
                    }
                }
            }
        } catch let error as TarError {
            // The events before the error are still acted on, then the stream stops.
            await run(steps)
            stop(WarmSetError.archive(error).description)
            return
        } catch {
            stop("\(error)")
            return
        }
        await run(steps)
    }

    private func run(_ steps: [Step]) async {
        for step in steps {
            guard fatal == nil else { return }
            switch step {
            case .start(let name, let size, let isRegularFile): await start(name: name, size: size, isRegularFile: isRegularFile)
            case .data(let bytes): write(bytes)
            case .end: await end()
            }
        }
    }

    func finish() async -> JSONValue {
        if fatal == nil {
            do {
                try reader.finish()
            } catch {
                stop(WarmSetError.archive(error).description)
            }
        }
        if fatal == nil, !sawManifest {
            stop(WarmSetError.noManifest(found: "nothing").description)
        }
        discardMember()
        // Rows without their member: evicted at the exporter during the export, or cut.
        for (name, row) in rows where !seen.contains(name) {
            summary.refuse(row.entry, reason: "not in the archive (left the exporter's cache during the export, or the stream was cut)")
        }
        summary.error = fatal
        onEnd(summary)
        return summary.json
    }

    func abandon() async {
        discardMember()
        fatal = fatal ?? "the client went away"
    }

    // MARK: Members

    private func start(name: String, size: Int, isRegularFile: Bool) async {
        if !sawManifest {
            sawManifest = true
            guard name == WarmSetManifestRow.memberName, isRegularFile else {
                stop(WarmSetError.noManifest(found: name).description)
                return
            }
            guard size <= Self.maxManifestBytes else {
                stop(WarmSetError.manifestTooLarge(bytes: size, limit: Self.maxManifestBytes).description)
                return
            }
            manifestText = []
            manifestText!.reserveCapacity(size)
            return
        }
        member = nil
        guard let row = rows[name] else {
            summary.refuse(name: name, url: nil, reason: "a member the manifest does not name")
            return
        }
        guard !seen.contains(name) else {
            summary.refuse(name: name, url: row.entry.url, reason: "a second member of the same name")
            return
        }
        seen.insert(name)
        guard isRegularFile else {
            summary.refuse(row.entry, reason: "not a regular file (a link, device or folder)")
            return
        }
        guard size == row.entry.bytes else {
            summary.refuse(row.entry, reason: "its member is \(size) bytes, the manifest says \(row.entry.bytes)")
            return
        }
        guard size <= maxMemberBytes else {
            summary.refuse(row.entry, reason: "\(size) bytes, over max-body-bytes (\(maxMemberBytes))")
            return
        }
        if let cached = disk.lookup(row.entry.key) {
            if cached.entry.sha256 == row.entry.sha256 {
                summary.skip(row.entry)
                return
            }
            guard replace else {
                summary.refuse(row.entry, reason: "cached here with another digest (\(cached.entry.sha256.hex.prefix(12))…); import with --replace to take it")
                return
            }
        }
        guard !full else {
            summary.refuse(row.entry, reason: "the cache is full (disk-limit): no room made")
            return
        }
        guard await reserve(size) else {
            full = true
            summary.refuse(row.entry, reason: "the cache is full (disk-limit): no room made")
            return
        }
        do {
            member = MemberWrite(row: row, file: try disk.directory.makeTempFile(for: row.entry.key), reserved: size)
        } catch {
            disk.budget.release(size)
            summary.refuse(row.entry, reason: "\(error)")
        }
    }

    private func write(_ bytes: [UInt8]) {
        if manifestText != nil {
            manifestText!.append(contentsOf: bytes)
            return
        }
        guard let member else { return }
        do {
            try member.file.write(bytes)
            bytes.withUnsafeBytes { member.hasher.update($0) }
        } catch {
            summary.refuse(member.row.entry, reason: "\(error)")
            discardMember()
        }
    }

    private func end() async {
        if let text = manifestText {
            manifestText = nil
            readManifest(text)
            return
        }
        guard let member else { return }
        self.member = nil
        var entry = member.row.entry
        let digest = member.hasher.finish()
        guard digest == entry.sha256 else {
            member.file.discard()
            disk.budget.release(member.reserved)
            summary.refuse(entry, reason: "its SHA-256 is \(digest.hex.prefix(12))…, the manifest says \(entry.sha256.hex.prefix(12))… (damaged in transit)")
            return
        }
        let info: ImageInfo
        do {
            info = try validator.validate(FileByteSource(fileDescriptor: member.file.fileDescriptor, count: entry.bytes))
        } catch {
            member.file.discard()
            disk.budget.release(member.reserved)
            summary.refuse(entry, reason: "not a valid image: \(error)")
            return
        }
        entry.format = info.format
        entry.width = info.width
        entry.height = info.height
        // Charged to the importing uid, as a download is to its asker: refused before it is
        // published when it is larger than that uid may hold (quotas per user).
        entry.owner = owner
        if let refusal = disk.quotaRefusal(owner: owner, bytes: entry.bytes, key: entry.key) {
            member.file.discard()
            disk.budget.release(member.reserved)
            summary.refuse(entry, reason: refusal)
            return
        }
        let key = entry.key
        disk.beginPublishing(key)
        do {
            try disk.directory.publish(member.file, as: key)
            try disk.record([entry], releasing: member.reserved, endingPublishing: [key])
            disk.charged([owner])
        } catch {
            disk.endPublishing([key])
            member.file.discard()
            disk.budget.release(member.reserved)
            summary.refuse(entry, reason: "publishing failed: \(error)")
            return
        }
        memory.remove(key)  // a replaced entry's old bytes must not be served from memory
        summary.take(entry)
    }

    private func readManifest(_ text: [UInt8]) {
        let now = WallClock.nowMilliseconds()
        var number = 0
        for line in text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            number += 1
            if line.isEmpty { continue }
            do {
                let value = try JSONValue(parsing: line)
                let row = try WarmSetManifestRow(json: value, line: number, now: now)
                guard rows[row.memberName] == nil else {
                    stop(WarmSetError.badManifest(line: number, reason: "key \(row.memberName) is listed twice").description)
                    return
                }
                rows[row.memberName] = row
            } catch let error as WarmSetError {
                stop(error.description)
                return
            } catch {
                stop(WarmSetError.badManifest(line: number, reason: "not JSON: \(error)").description)
                return
            }
        }
        summary.manifestEntries = rows.count
    }

    /// Room for `bytes` under the cap, as a download asks it (eviction of the least recently used).
    private func reserve(_ bytes: Int) async -> Bool {
        let downloader = self.downloader
        return await withCheckedContinuation { continuation in
            disk.room.reserve(bytes, settlingFirst: { await downloader.settlePublishing() }) { continuation.resume(returning: $0) }
        }
    }

    private func discardMember() {
        if let member {
            member.file.discard()
            disk.budget.release(member.reserved)
        }
        member = nil
    }

    private func stop(_ reason: String) {
        guard fatal == nil else { return }
        fatal = reason
        discardMember()
    }
}

/// What an import took, skipped and refused: its reply (Protocol.md, `import`).
struct WarmSetImportSummary: Sendable {
    var manifestEntries = 0
    var taken = 0
    var takenBytes = 0
    var skipped = 0
    var refused = 0
    var refusals: [JSONValue] = []
    var error: String?

    mutating func take(_ entry: IndexEntry) {
        taken += 1
        takenBytes += entry.bytes
    }

    mutating func skip(_ entry: IndexEntry) {
        skipped += 1
    }

    mutating func refuse(_ entry: IndexEntry, reason: String) {
        refuse(name: entry.key.hex, url: entry.url, reason: reason)
    }

    mutating func refuse(name: String, url: String?, reason: String) {
        refused += 1
        guard refusals.count < WarmSetImport.maxListed else { return }
        var members: [String: JSONValue] = ["key": .string(EchoedText.cut(name)), "reason": .string(reason)]
        if let url { members["url"] = .string(url) }
        refusals.append(.object(members))
    }

    var json: JSONValue {
        var members: [String: JSONValue] = [
            "manifest_entries": JSONValue(manifestEntries), "taken": JSONValue(taken), "taken_bytes": JSONValue(takenBytes),
            "skipped": JSONValue(skipped), "refused": JSONValue(refused), "refusals": .array(refusals),
        ]
        if let error { members["error"] = .string(error) }
        return .object(members)
    }
}
