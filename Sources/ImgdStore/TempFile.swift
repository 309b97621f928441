#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

/// A body being written: a file in the cache's temp folder that has no final name yet.
///
/// It is either published by ``CacheDirectory/publish(_:as:)`` or discarded; if neither happens
/// (an error path forgot it), deinit removes it so no partial file is left behind. Owned by
/// one thread or serial queue at a time (the downloader's spill lane or its publisher); not
/// `Sendable`.
public final class TempFile {
    /// Absolute path, for messages.
    public let path: String
    /// Name inside the temp folder.
    let name: String
    /// Open for writing (and reading back for validation) until published or discarded.
    public private(set) var fileDescriptor: Int32
    /// Bytes written so far.
    public private(set) var count = 0
    /// The temp folder it lives in (the one open when it was made, even if the folder was reopened since).
    let folderDescriptor: Int32
    private var isFinished = false

    init(name: String, path: String, fileDescriptor: Int32, folderDescriptor: Int32) {
        self.name = name
        self.path = path
        self.fileDescriptor = fileDescriptor
        self.folderDescriptor = folderDescriptor
    }

    deinit { discard() }

    /// Appends `bytes`, retrying short writes and interrupts.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(StoreError) {
        do throws(WriteError) {
            try writeAll(fileDescriptor, bytes)
            count += bytes.count
        } catch {
            count += error.written
            throw .writeFailed(path: path, errno: error.errno)
        }
    }

    /// Appends `bytes`, retrying short writes and interrupts.
    public func write(_ bytes: [UInt8]) throws(StoreError) {
        do throws(WriteError) {
            try writeAll(fileDescriptor, bytes)
            count += bytes.count
        } catch {
            count += error.written
            throw .writeFailed(path: path, errno: error.errno)
        }
    }

    /// Closes and removes the file. Safe to call more than once.
    public func discard() {
        guard !isFinished else { return }
        isFinished = true
        close(fileDescriptor)
        fileDescriptor = -1
        unlinkat(folderDescriptor, name, 0)
    }

    /// Closes the descriptor after a successful rename; the file now belongs to the cache.
    func markPublished() {
        isFinished = true
        close(fileDescriptor)
        fileDescriptor = -1
    }
}
