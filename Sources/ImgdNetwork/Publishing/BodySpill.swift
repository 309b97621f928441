import Dispatch
import ImgdCore
import ImgdStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The part of a body too large for the transfer buffer that has already been handed off: its
/// temp file and its SHA-256 so far, both advanced on one of the publisher's spill lanes.
///
/// Why not write on the transfer loop: on a large image the loop was the critical path —
/// receiving from the socket, then copying every 64 KiB into the page cache — while the
/// publisher read the whole file back to hash it. Now the loop only receives; each full buffer
/// is moved (not copied) to a lane, which hashes it while it is still in the CPU's cache and
/// appends it to the file, and nothing is read back. Two lanes, chosen by the key, keep two
/// cores busy with several large bodies arriving at once.
///
/// Chunks of one body run in order on its lane. The loop learns of a failed write at its next
/// chunk (``failure``) and stops the transfer then; the publisher learns of it at ``finish(tail:)``.
/// Chunks waiting on all lanes together are capped by a ``SpillGate``: when the disk cannot keep
/// up, the loop waits for it instead of holding the bodies in memory.
///
/// `@unchecked Sendable`: `file` and `hasher` are touched only on `lane`; the failure is behind
/// its mutex (the loop reads it), and `isDiscarded` is atomic.
final class BodySpill: @unchecked Sendable {
    let lane: DispatchQueue
    private let cache: CacheDirectory
    private let key: CacheKey
    private let gate: SpillGate
    private var file: TempFile?
    private var hasher = SHA256Hasher()
    private let failureBox = Locked<StoreError?>(nil)
    /// Set by ``discard()``: chunks still queued are dropped instead of written.
    private let isDiscarded = Atomic<Bool>(false)

    init(lane: DispatchQueue, cache: CacheDirectory, key: CacheKey, gate: SpillGate) {
        self.lane = lane
        self.cache = cache
        self.key = key
        self.gate = gate
    }

    /// The first write that failed (the rest of the body is then dropped), if any.
    var failure: StoreError? { failureBox.withLock { $0 } }

    /// On the loop: queues `chunk` to be hashed and appended to the file (made with the first
    /// chunk). Waits while the lanes hold as many chunks as the gate allows.
    func append(_ chunk: [UInt8]) {
        gate.enter()
        lane.async { [self] in
            defer { gate.leave() }
            guard failure == nil, !isDiscarded.load(ordering: .relaxed) else { return }
            do throws(StoreError) {
                try write(chunk)
            } catch {
                failureBox.withLock { $0 = error }
            }
        }
    }

    /// On `lane`, after every chunk: appends `tail` (the bytes still in the transfer's buffer) and
    /// returns the complete temp file with the body's digest. Throws the first write failure; the
    /// file is then removed.
    func finish(tail: [UInt8]) throws(StoreError) -> (file: TempFile, digest: SHA256Digest) {
        dispatchPrecondition(condition: .onQueue(lane))
        do throws(StoreError) {
            if let failure { throw failure }
            try write(tail)
        } catch {
            file?.discard()
            throw error
        }
        guard let file else { throw .writeFailed(path: cache.tempFolder, errno: EIO) }  // a spill always had a chunk
        return (file, hasher.finish())
    }

    /// Removes the temp file (a failed or cancelled transfer) and returns once it is gone: a
    /// caller may rely on the space being free (on a full filesystem, the index cannot record
    /// the eviction that makes room until it is). This body's chunks still queued are dropped
    /// unwritten; the wait is for what the lane does before them for other bodies — at most the
    /// gate's worth of chunks, and the header-and-end check and rename of bodies finishing.
    func discard() {
        isDiscarded.store(true, ordering: .relaxed)
        lane.sync { file?.discard() }
    }

    private func write(_ bytes: [UInt8]) throws(StoreError) {
        let file: TempFile
        if let existing = self.file { file = existing } else { file = try cache.makeTempFile(for: key) }
        self.file = file
        bytes.withUnsafeBytes { hasher.update($0) }
        try file.write(bytes)
    }
}
