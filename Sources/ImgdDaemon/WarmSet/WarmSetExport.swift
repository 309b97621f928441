import ImgdCore
import ImgdStore
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The bytes of `export` (a tar stream: the manifest, then each entry's file named by its key)
/// or of `manifest` (the manifest's lines alone), one chunk at a time for the control stream.
///
/// Memory: the manifest (one line per entry, built before the first byte so its tar header can
/// state its size) and one chunk of at most ``chunkSize``. Each entry is opened with
/// ``DiskCache/openVerified(_:)`` as its turn comes, so what is sent is exactly what its row
/// says; an entry evicted or replaced since the manifest was made is left out and counted
/// (``skipped``), and the importer reports it as missing from the archive.
actor WarmSetExport: ControlStreamSource {
    /// The largest chunk handed to the connection.
    static let chunkSize = 256 * 1024

    private let disk: DiskCache
    private let rows: [WarmSetManifestRow]
    private let manifestOnly: Bool
    private var manifest: [UInt8]
    private var nextRow = 0
    /// The entry being sent: its descriptor, what is left of it, and its padding.
    private var current: (descriptor: Int32, offset: Int, left: Int, padding: Int)?
    private var startedManifest = false
    private var ended = false
    /// Entries left out because they left the cache (or changed) after the manifest was made.
    private(set) var skipped = 0
    private let onEnd: @Sendable (_ written: Int, _ skipped: Int) -> Void

    init(disk: DiskCache, rows: [WarmSetManifestRow], manifestOnly: Bool, onEnd: @escaping @Sendable (Int, Int) -> Void) {
        self.disk = disk
        self.rows = rows
        self.manifestOnly = manifestOnly
        self.onEnd = onEnd
        var text = ""
        for row in rows {
            text += row.json.jsonText
            text += "\n"
        }
        manifest = Array(text.utf8)
    }

    /// The manifest's size in bytes.
    var manifestBytes: Int { manifest.count }

    func next() async throws -> ByteBuffer? {
        if ended { return nil }
        if manifestOnly {
            ended = true
            onEnd(0, 0)
            return ByteBuffer(bytes: manifest)
        }
        var chunk = ByteBuffer()
        chunk.reserveCapacity(Self.chunkSize + 1024)
        if !startedManifest {
            startedManifest = true
            chunk.writeBytes(TarHeader.regularFile(name: WarmSetManifestRow.memberName, size: manifest.count, modified: Int(time(nil))))
            chunk.writeBytes(manifest)
            chunk.writeRepeatingByte(0, count: TarHeader.padding(after: manifest.count))
            manifest = []
        }
        while chunk.readableBytes < Self.chunkSize {
            if current == nil, !openNext(into: &chunk) {
                chunk.writeBytes(TarHeader.endOfArchive)
                ended = true
                onEnd(nextRow - skipped, skipped)
                break
            }
            guard var entry = current else { continue }
            let want = min(entry.left, Self.chunkSize - chunk.readableBytes)
            // The header just written filled the chunk: its bytes start the next one. (Reading
            // 0 bytes here was taken for a failed read, and cut the stream.)
            if want == 0 { break }
            let read = chunk.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { buffer in
                max(0, pread(entry.descriptor, buffer.baseAddress, want, off_t(entry.offset)))
            }
            guard read > 0 else {
                // The file shrank or failed under us: the stream cannot go on consistently.
                Glibc.close(entry.descriptor)
                current = nil
                throw WarmSetExportError.readFailed(key: rows[nextRow - 1].memberName)
            }
            entry.offset += read
            entry.left -= read
            if entry.left == 0 {
                chunk.writeRepeatingByte(0, count: entry.padding)
                Glibc.close(entry.descriptor)
                current = nil
            } else {
                current = entry
            }
        }
        return chunk
    }

    /// Opens the next entry still cached as its row says and writes its header; false at the end.
    private func openNext(into chunk: inout ByteBuffer) -> Bool {
        while nextRow < rows.count {
            let row = rows[nextRow]
            nextRow += 1
            guard case .opened(let file, let found) = disk.openVerified(row.entry.key) else {
                skipped += 1
                continue
            }
            guard found.entry.sha256 == row.entry.sha256, file.size == row.entry.bytes else {
                Glibc.close(file.descriptor)
                skipped += 1
                continue
            }
            chunk.writeBytes(TarHeader.regularFile(name: row.memberName, size: file.size, modified: row.entry.fetchedAt / 1000))
            current = (file.descriptor, 0, file.size, TarHeader.padding(after: file.size))
            if file.size == 0 {
                Glibc.close(file.descriptor)
                current = nil
            }
            return true
        }
        return false
    }

    func abandon() async {
        if let entry = current { Glibc.close(entry.descriptor) }
        current = nil
        ended = true
    }
}

/// An export that could not go on.
enum WarmSetExportError: Error, CustomStringConvertible {
    case readFailed(key: String)

    var description: String {
        switch self {
        case .readFailed(let key): "reading entry \(key) failed midway; the stream was cut"
        }
    }
}
