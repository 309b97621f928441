import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// Where an answer came from.
public enum CacheSource: String, Sendable, Equatable {
    case memory, disk, network
}

/// A cached image found by ``TieredCache/lookup(_:needs:)``.
public struct CacheHit: Sendable, Equatable {
    /// The disk entry (path, size, SHA-256, format, dimensions).
    public let entry: CachedEntry
    /// The bytes, when they were asked for (or were in memory anyway).
    public let bytes: [UInt8]?
    /// The tier that answered.
    public let source: CacheSource
}

/// What a lookup must return: the file on disk (a path to hand out), or the bytes themselves.
public enum CacheNeed: Sendable, Equatable {
    /// A path the caller will open: the file must exist.
    case file
    /// The bytes: a memory copy will do even if the file is gone (the disk tier is degraded).
    case bytes
}

/// The two tiers as one: memory first, then disk.
///
/// A disk hit whose bytes are read (asked for, or small enough to keep) fills the memory tier,
/// which keeps the entry with them so a later memory hit needs no index query. Every hit is
/// noted as an access for the disk tier's LRU order (batched; see ``CacheIndex``).
public final class TieredCache: Sendable {
    public let memory: MemoryCache
    public let disk: DiskCache

    public init(memory: MemoryCache, disk: DiskCache) {
        self.memory = memory
        self.disk = disk
    }

    /// The image for `key`, from memory or disk, or nil on a miss.
    public func lookup(_ key: CacheKey, needs need: CacheNeed) -> CacheHit? {
        memoryLookup(key, needs: need) ?? diskLookup(key, needs: need)
    }

    /// The image for `key` from the disk tier, filling the memory tier with its bytes when they
    /// are read (asked for, or small enough to keep): for a caller that has just asked
    /// ``memoryLookup(_:needs:)``, so the memory tier counts one miss, not two.
    public func diskLookup(_ key: CacheKey, needs need: CacheNeed) -> CacheHit? {
        guard let found = disk.lookup(key) else { return nil }
        disk.index.recordAccess(key, at: WallClock.nowMilliseconds())
        return diskHit(found, needs: need)
    }

    /// The hit for `found`, a disk entry in hand (looked up by the caller, its access noted),
    /// without asking the index again: its bytes read when asked for or small enough to keep,
    /// filling the memory tier; nil when they were asked for and cannot be read.
    public func diskHit(_ found: CachedEntry, needs need: CacheNeed) -> CacheHit? {
        var bytes: [UInt8]?
        if need == .bytes || found.entry.bytes <= memory.statistics.limitBytes / 8 {
            bytes = Self.read(found)
            if let bytes { memory.insert(MemoryImage(bytes: bytes, entry: found), for: found.entry.key) }
            if bytes == nil, need == .bytes { return nil }  // gone or changed since the size check
        }
        return CacheHit(entry: found, bytes: need == .bytes ? bytes : nil, source: .disk)
    }

    /// The hit for an entry just recorded (the row the downloader wrote, handed back with its
    /// result), as ``diskLookup(_:needs:)`` would find it but without the index query: one
    /// `fstatat` checks the file is still in place with its size; nil when it is not (evicted
    /// at once) or, for bytes, cannot be read.
    public func recordedHit(_ recorded: CachedEntry, needs need: CacheNeed) -> CacheHit? {
        let key = recorded.entry.key
        guard disk.directory.existingSize(of: key) == recorded.entry.bytes else { return nil }
        disk.index.recordAccess(key, at: WallClock.nowMilliseconds())
        return diskHit(recorded, needs: need)
    }

    /// For a reader that holds `found`'s file open (``DiskCache/openVerified(_:)``): its bytes,
    /// read from `descriptor` (so they are the bytes the row describes) and kept in the memory
    /// tier, when small enough to keep (as ``diskHit(_:needs:)`` keeps them); else nil.
    public func keepInMemory(_ found: CachedEntry, from descriptor: Int32) -> [UInt8]? {
        let size = found.entry.bytes
        guard size > 0, size <= memory.statistics.limitBytes / 8 else { return nil }
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        let complete = bytes.withUnsafeMutableBytes { buffer -> Bool in
            while done < size {
                let got = retryingOnInterrupt { pread(descriptor, buffer.baseAddress! + done, size - done, off_t(done)) }
                guard got > 0 else { return false }
                done += got
            }
            return true
        }
        guard complete else { return nil }
        memory.insert(MemoryImage(bytes: bytes, entry: found), for: found.entry.key)
        return bytes
    }

    /// The image for `key` from the memory tier alone: no index query, no file read (for a
    /// path, one `fstatat` checks the file is still there), so it may run where nothing may wait.
    public func memoryLookup(_ key: CacheKey, needs need: CacheNeed) -> CacheHit? {
        guard let image = memory.image(for: key), let entry = image.entry else { return nil }
        // Evicted from disk means evicted: a memory copy of a file that is gone is not handed
        // out as a path (it is for bytes, so a degraded disk tier still serves what it can).
        guard need == .bytes || disk.directory.existingSize(of: key) == entry.entry.bytes else {
            memory.remove(key)
            return nil
        }
        disk.index.recordAccess(key, at: WallClock.nowMilliseconds())
        return CacheHit(entry: entry, bytes: image.bytes, source: .memory)
    }

    /// Removes `key` from both tiers.
    public func remove(_ key: CacheKey) {
        memory.remove(key)
        disk.drop(key)
    }

    /// The file's bytes, if it still has the recorded size.
    private static func read(_ found: CachedEntry) -> [UInt8]? {
        let fd = open(found.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let size = found.entry.bytes
        guard size > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        let complete = bytes.withUnsafeMutableBytes { buffer -> Bool in
            while done < size {
                let got = retryingOnInterrupt { Glibc.read(fd, buffer.baseAddress! + done, size - done) }
                guard got > 0 else { return false }
                done += got
            }
            return true
        }
        return complete ? bytes : nil
    }
}
