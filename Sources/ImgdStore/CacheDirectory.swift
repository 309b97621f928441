import ImgdCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The cache folder on disk: `<root>/<2 hex>/<64 hex>` files named by ``CacheKey``, and
/// `<root>/tmp/` for bodies still arriving.
///
/// A file appears under its final name complete and validated: by `rename(2)` of a temp file,
/// or, for a body that was whole in memory and whose name is free, written there directly
/// (``publishNew(_:as:)``: only a crash inside that one write can leave a short file there, and
/// it has no index row). Leftovers in `tmp/` are removed when the folder is opened. Paths are
/// resolved relative to descriptors opened once (`openat`/`renameat`), and the 256 fan-out
/// folders are created when the folder is opened, so publishing a file never makes a folder
/// (unless an operator removed one). A cache written by an earlier imgd in
/// the two-level layout (`ab/cd/<64 hex>`) is moved to this one when opened
/// (``movedFromTwoLevelLayout``).
public final class CacheDirectory: Sendable {
    /// The cache folder, as given.
    public let root: String
    /// Bodies in progress; emptied at start.
    public var tempFolder: String { root + "/tmp" }

    /// The folder's descriptors, swapped by ``reopen()`` when the folder was removed at run time.
    /// Replaced descriptors are kept open, never closed, so a call that read them just before the
    /// swap cannot land on a reused descriptor number (one pair per recovery, so few).
    private let descriptors: Locked<FolderDescriptors>
    /// Makes temp names unique within this process; the pid makes them unique across processes.
    private let tempCounter = Atomic<UInt64>(0)
    private let processID = getpid()
    /// Files moved from the two-level layout of earlier versions when the folder was opened.
    public let movedFromTwoLevelLayout: Int

    /// Opens (creating if needed) the cache folder at `root`, moves a two-level layout to the
    /// one-level one, and empties its temp folder.
    public init(root: String) throws(StoreError) {
        self.root = root
        let opened = try Self.openFolders(root)
        descriptors = Locked(opened)
        movedFromTwoLevelLayout = Self.adoptOneLevelLayout(root: root, descriptor: opened.root)
        removeTempLeftovers()
    }

    deinit {
        descriptors.withLock { descriptors in
            for fd in descriptors.retired + [descriptors.temp, descriptors.root] { close(fd) }
        }
    }

    /// Creates the folder and its first-level fan-out folders and opens it.
    private static func openFolders(_ root: String) throws(StoreError) -> FolderDescriptors {
        try makeFolders(root)
        let rootDescriptor = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard rootDescriptor >= 0 else { throw .cannotOpenFolder(path: root, errno: errno) }
        if mkdirat(rootDescriptor, "tmp", 0o755) != 0, errno != EEXIST {
            let code = errno
            close(rootDescriptor)
            throw .cannotOpenFolder(path: root + "/tmp", errno: code)
        }
        let tempDescriptor = openat(rootDescriptor, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard tempDescriptor >= 0 else {
            let code = errno
            close(rootDescriptor)
            throw .cannotOpenFolder(path: root + "/tmp", errno: code)
        }
        // The 256 fan-out folders, once: a publish is then a rename, never a mkdir.
        for first in 0..<256 {
            let name = hexByte(first)
            if mkdirat(rootDescriptor, name, 0o755) != 0, errno != EEXIST {
                let code = errno
                close(tempDescriptor)
                close(rootDescriptor)
                throw .cannotOpenFolder(path: root + "/" + name, errno: code)
            }
        }
        return FolderDescriptors(root: rootDescriptor, temp: tempDescriptor)
    }

    var rootDescriptor: Int32 { descriptors.withLock { $0.root } }
    private var tempDescriptor: Int32 { descriptors.withLock { $0.temp } }

    // MARK: - Durability

    /// Asks the kernel to write to the disk everything written so far on the cache's filesystem
    /// (`syncfs(2)`): published files' data and names included. True when it did; false when it
    /// failed or the C library has no `syncfs`.
    ///
    /// A publish never fsyncs (an fsync per image would cost more than its download), so a
    /// power cut can lose a file's data under a committed row; the index then checks contents
    /// after the unclean start. A clean stop calls this before it records the clean stop, so
    /// that record never vouches for data still in memory.
    public func syncFilesystem() -> Bool {
        guard let syncfs = Self.syncfs else { return false }
        return syncfs(rootDescriptor) == 0
    }

    private typealias SyncFunction = @convention(c) (Int32) -> Int32

    /// glibc's `syncfs`, found once: Swift's Glibc module does not declare it (a GNU extension).
    /// A nil handle is the global symbol scope (`RTLD_DEFAULT`, which Swift does not import).
    private static let syncfs: SyncFunction? = dlsym(nil, "syncfs").map { unsafeBitCast($0, to: SyncFunction.self) }

    // MARK: - Health

    /// True while the folder we hold open is still the one at ``root`` (not removed, renamed
    /// away or replaced by another).
    public var isInPlace: Bool {
        var held = stat(), named = stat()
        guard fstat(rootDescriptor, &held) == 0, stat(root, &named) == 0 else { return false }
        return held.st_dev == named.st_dev && held.st_ino == named.st_ino && held.st_nlink > 0
    }

    /// Checks that a file can be created in the temp folder (creates and removes one); the
    /// error says why not (read-only filesystem, permissions, no space or inodes).
    public func probeWritable() throws(StoreError) {
        let name = ".probe.\(processID)"
        let fd = openat(tempDescriptor, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .cannotCreateTempFile(path: tempFolder, errno: errno) }
        close(fd)
        unlinkat(tempDescriptor, name, 0)
    }

    /// Creates the folder again at ``root`` and uses it from now on: the recovery when the
    /// folder was removed while imgd ran. Files in the old folder are not carried over.
    public func reopen() throws(StoreError) {
        let opened = try Self.openFolders(root)
        descriptors.withLock { descriptors in
            descriptors.retired += [descriptors.root, descriptors.temp]
            descriptors.root = opened.root
            descriptors.temp = opened.temp
        }
    }

    /// The absolute path an entry has (or would have).
    public func path(for key: CacheKey) -> String { root + "/" + key.relativePath }

    /// The size of the cached file for `key`, or nil when there is none.
    public func existingSize(of key: CacheKey) -> Int? {
        var info = stat()
        let root = rootDescriptor
        guard key.withRelativePath({ fstatat(root, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0,
            (info.st_mode & S_IFMT) == S_IFREG
        else { return nil }
        return Int(info.st_size)
    }

    /// Creates an empty temp file for a body of `key`.
    public func makeTempFile(for key: CacheKey) throws(StoreError) -> TempFile {
        let serial = tempCounter.add(1, ordering: .relaxed).newValue
        let name = "\(key.hex).\(processID).\(serial).part"
        let folder = tempDescriptor
        let fd = openat(folder, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw .cannotCreateTempFile(path: tempFolder, errno: errno) }
        return TempFile(name: name, path: tempFolder + "/" + name, fileDescriptor: fd, folderDescriptor: folder)
    }

    /// Gives `file` its final name for `key` (replacing any older file atomically) and returns
    /// the final path. On failure the temp file is left for the caller to discard.
    @discardableResult
    public func publish(_ file: TempFile, as key: CacheKey) throws(StoreError) -> String {
        let relativePath = key.relativePath
        let rootDescriptor = rootDescriptor
        var result = renameat(file.folderDescriptor, file.name, rootDescriptor, relativePath)
        if result != 0, errno == ENOENT {
            try remakeFanOutFolder(of: key, in: rootDescriptor)
            result = renameat(file.folderDescriptor, file.name, rootDescriptor, relativePath)
        }
        guard result == 0 else { throw .publishFailed(path: path(for: key), errno: errno) }
        file.markPublished()
        return path(for: key)
    }

    /// Writes a complete, validated body straight to its final name for `key`, when no file has
    /// that name yet, and returns the final path; nil when one has (the caller then publishes
    /// through a temp file and ``publish(_:as:)``, which replaces the old file atomically, so a
    /// reader of the old file keeps reading it whole).
    ///
    /// Why not always a temp file and a rename: on ext4 the rename is the dearest step of
    /// publishing a small image (about 15 µs, more than creating the file; see bench/README.md),
    /// and what makes a file an entry is its index row, written only after this returns. A file
    /// under a final name without a row — only after a crash in the middle of this write — is
    /// never served (lookups go by the row, and check its size) and is removed by the reconcile.
    /// On a failed write the file is removed before the error is thrown.
    public func publishNew(_ bytes: [UInt8], as key: CacheKey) throws(StoreError) -> String? {
        let rootDescriptor = rootDescriptor
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW
        var fd = key.withRelativePath { openat(rootDescriptor, $0, flags, 0o644) }
        if fd < 0, errno == ENOENT {
            try remakeFanOutFolder(of: key, in: rootDescriptor)
            fd = key.withRelativePath { openat(rootDescriptor, $0, flags, 0o644) }
        }
        if fd < 0 {
            if errno == EEXIST { return nil }
            throw .publishFailed(path: path(for: key), errno: errno)
        }
        var failure: Int32?
        do throws(WriteError) {
            try writeAll(fd, bytes)
        } catch {
            failure = error.errno
        }
        close(fd)
        if let failure {
            _ = key.withRelativePath { unlinkat(rootDescriptor, $0, 0) }
            throw .writeFailed(path: path(for: key), errno: failure)
        }
        return path(for: key)
    }

    /// Makes `key`'s fan-out folder again: an operator cleaning up removed it under us. Called
    /// once, when creating or renaming into it found it missing.
    private func remakeFanOutFolder(of key: CacheKey, in rootDescriptor: Int32) throws(StoreError) {
        let folder = Self.hexByte(key.fanOutBucket)
        guard mkdirat(rootDescriptor, folder, 0o755) == 0 || errno == EEXIST else {
            throw .cannotOpenFolder(path: root + "/" + folder, errno: errno)
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func hexByte(_ value: Int) -> String {
        String(decoding: [hexDigits[value >> 4], hexDigits[value & 0xF]], as: UTF8.self)
    }

    private func removeTempLeftovers() {
        let folder = tempDescriptor
        for name in Self.fileNames(in: tempFolder) { unlinkat(folder, name, 0) }
    }

    /// The names in `folder` (none if it cannot be read), `.` and `..` excluded.
    static func fileNames(in folder: String) -> [String] {
        guard let handle = opendir(folder) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    /// Creates the folder at `path` (and its parents) if missing: the cache lock lives in it, and
    /// the lock must be held before anything in the folder is changed.
    static func makeFolders(_ path: String) throws(StoreError) {
        if let failure = Folders.make(path) { throw .cannotOpenFolder(path: failure.path, errno: failure.errno) }
    }
}

/// The descriptors a ``CacheDirectory`` resolves paths against.
private struct FolderDescriptors {
    var root: Int32
    var temp: Int32
    /// Descriptors of folders replaced by ``CacheDirectory/reopen()``, closed at deinit.
    var retired: [Int32] = []
}
