import Dispatch
import ImgdCore
import ImgdStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A body that arrived whole, with what the response said about it: what the publisher needs to
/// validate it and give it its final name, moved off the transfer loop in one piece.
///
/// `@unchecked Sendable`: ownership moves — the loop hands it over and keeps no reference to
/// its temp file or buffer; only the publisher's queue touches it afterwards.
final class ArrivedBody: @unchecked Sendable {
    let url: ImageURL
    let key: CacheKey
    /// Identifies the job it belongs to, so a late result for a cancelled job is recognised.
    let jobSerial: UInt64
    /// Bytes not yet written to `file` (all of them, for a body that fit in memory).
    let buffer: [UInt8]
    /// The temp file holding the rest, for a body larger than the buffer.
    let file: TempFile?
    let bytes: Int
    let finalURL: String
    let status: Int
    let etag: String?
    let lastModified: String?
    let contentType: String?
    let duration: Duration
    let attempts: Int

    init(
        url: ImageURL, key: CacheKey, jobSerial: UInt64, buffer: [UInt8], file: TempFile?, bytes: Int,
        finalURL: String, status: Int, etag: String?, lastModified: String?,
        contentType: String?, duration: Duration, attempts: Int
    ) {
        self.url = url
        self.key = key
        self.jobSerial = jobSerial
        self.buffer = buffer
        self.file = file
        self.bytes = bytes
        self.finalURL = finalURL
        self.status = status
        self.etag = etag
        self.lastModified = lastModified
        self.contentType = contentType
        self.duration = duration
        self.attempts = attempts
    }
}

/// Validates arrived bodies and publishes them into the cache, on its own serial queue, so the
/// transfer loop goes straight back to moving bytes while the disk work of the previous image
/// (create, write, rename, index row) proceeds on the other core.
///
/// Index rows are written in batches: one transaction when the queue runs dry or every
/// ``maxBatch`` images, and only then are those images reported done, so a caller told "cached"
/// always finds the row.
///
/// `@unchecked Sendable`: the batch (`pendingRows`, `pendingDeliveries`) is touched only on
/// `queue`; `waiting` is atomic.
final class BodyPublisher: @unchecked Sendable {
    typealias Completion = @Sendable (ArrivedBody, Result<CachedImage, DownloadError>) -> Void

    /// Rows written per transaction at most.
    static let maxBatch = 256

    private let queue = DispatchQueue(label: "imgd-publisher")
    private let disk: DiskCache
    private var cache: CacheDirectory { disk.directory }
    private let validator: ImageValidator
    /// Bodies handed over and not yet processed: zero means the queue is about to go idle.
    private let waiting = Atomic<Int>(0)
    private var pendingRows: [IndexEntry] = []
    private var pendingDeliveries: [(ArrivedBody, CachedImage, Completion)] = []

    init(cache: DiskCache, validator: ImageValidator) {
        self.disk = cache
        self.validator = validator
    }

    /// Validates and publishes `body`, then calls `completion` (on the publisher's queue) once
    /// its index row is committed, or at once on failure.
    func publish(_ body: ArrivedBody, completion: @escaping Completion) {
        waiting.add(1, ordering: .relaxed)
        queue.async { [self] in
            switch publishNow(body) {
            case .success(let image):
                pendingRows.append(Self.indexEntry(for: image))
                pendingDeliveries.append((body, image, completion))
            case .failure(let error):
                completion(body, .failure(error))
            }
            let remaining = waiting.subtract(1, ordering: .relaxed).newValue
            if remaining == 0 || pendingRows.count >= Self.maxBatch { commit() }
        }
    }

    /// Writes the pending rows in one transaction and reports their images done. If the index
    /// refuses (a full disk, say), the files go too and their jobs fail with `disk`.
    private func commit() {
        guard !pendingRows.isEmpty else { return }
        let deliveries = pendingDeliveries
        do {
            try disk.record(pendingRows)
            for (body, image, completion) in deliveries { completion(body, .success(image)) }
        } catch {
            for (body, image, completion) in deliveries {
                disk.drop(image.key)
                completion(body, .failure(.disk("cannot record \(image.url) in the cache index: \(error)")))
            }
        }
        pendingRows.removeAll(keepingCapacity: true)
        pendingDeliveries.removeAll(keepingCapacity: true)
    }

    private static func indexEntry(for image: CachedImage) -> IndexEntry {
        let record = image.download!
        let now = WallClock.nowMilliseconds()
        return IndexEntry(
            key: image.key, url: image.url.normalized, bytes: image.bytes, sha256: record.sha256,
            format: record.image.format, width: record.image.width, height: record.image.height,
            etag: record.etag, lastModified: record.lastModified, contentType: record.contentType,
            fetchedAt: now, lastAccess: now)
    }

    /// Checks the body and gives it its final name; on any failure nothing is left behind.
    func publishNow(_ body: ArrivedBody) -> Result<CachedImage, DownloadError> {
        do throws(DownloadError) {
            // The content digest is taken here, not as bytes arrive, so the transfer thread
            // spends its time on transfers; this queue runs on the other core.
            let info: ImageInfo
            let file: TempFile
            let digest: SHA256Digest
            if let existing = body.file {
                try write(body.buffer, to: existing)
                info = try validate(FileByteSource(fileDescriptor: existing.fileDescriptor, count: body.bytes))
                do {
                    digest = try SHA256Digest(fileDescriptor: existing.fileDescriptor, count: body.bytes)
                } catch {
                    throw .disk("cannot read back \(existing.path): \(String(cString: strerror(error.errno)))")
                }
                file = existing
            } else {
                // Small enough to have stayed in memory: check it before it touches the disk.
                info = try validate(MemoryByteSource(body.buffer))
                digest = body.buffer.withUnsafeBytes { SHA256Digest(of: $0) }
                do {
                    file = try cache.makeTempFile(for: body.key)
                } catch {
                    throw .disk(error.description)
                }
                try write(body.buffer, to: file)
            }
            defer { file.discard() }  // a no-op once published
            let record = DownloadRecord(
                finalURL: body.finalURL, status: body.status, etag: body.etag, lastModified: body.lastModified,
                contentType: body.contentType, bytes: body.bytes, sha256: digest, image: info,
                duration: body.duration, attempts: body.attempts)
            do {
                let path = try cache.publish(file, as: body.key)
                return .success(CachedImage(url: body.url, key: body.key, path: path, bytes: body.bytes, source: .network, download: record))
            } catch {
                throw .disk(error.description)
            }
        } catch {
            body.file?.discard()
            return .failure(error)
        }
    }

    private func write(_ bytes: [UInt8], to file: TempFile) throws(DownloadError) {
        var failure: StoreError?
        bytes.withUnsafeBytes { raw in
            do throws(StoreError) { try file.write(raw) } catch { failure = error }
        }
        if let failure { throw .disk(failure.description) }
    }

    private func validate(_ source: some ImageByteSource) throws(DownloadError) -> ImageInfo {
        do {
            return try validator.validate(source)
        } catch let error as ImageValidationError {
            switch error {
            case .notImage(let reason): throw .notImage(reason)
            case .truncated(let reason): throw .truncated(reason)
            case .tooManyPixels(let width, let height, let limit):
                throw .tooLarge("\(width)×\(height) pixels is over the \(limit)-pixel limit")
            }
        } catch {
            throw .disk("cannot read back the body: \(error)")
        }
    }
}
