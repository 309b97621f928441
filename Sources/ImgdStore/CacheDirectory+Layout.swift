#if canImport(Glibc)
import Glibc
#endif

/// Moving a cache from the two-level layout of earlier versions (`ab/cd/<64 hex>`, 65,536
/// folders) to the one-level layout (`ab/<64 hex>`, see ``CacheKey/relativePath``).
///
/// Done once, when the folder is opened, before anything else uses it: every file in a
/// second-level folder is renamed one level up (a rename is atomic: a crash leaves each file in
/// the old place or the new, and the next start carries on), the emptied folders are removed,
/// and a marker file says the folder is in the new layout, so later starts skip the scan.
/// Files that are not cache files are moved too, and are then removed by the reconcile like any
/// stray file.
extension CacheDirectory {
    /// The marker file in the cache root: present once the folder is in the one-level layout.
    static let layoutMarker = "layout-1-level"

    /// Moves what the two-level layout left (nothing, usually) and writes the marker; returns
    /// the number of files moved.
    static func adoptOneLevelLayout(root: String, descriptor rootDescriptor: Int32) -> Int {
        if faccessat(rootDescriptor, layoutMarker, F_OK, 0) == 0 { return 0 }
        var moved = 0
        for bucket in 0..<256 {
            let folder = hexByte(bucket)
            for name in fileNames(in: root + "/" + folder) where name.utf8.count == 2 {
                let subfolder = folder + "/" + name
                for file in fileNames(in: root + "/" + subfolder) {
                    if renameat(rootDescriptor, subfolder + "/" + file, rootDescriptor, folder + "/" + file) == 0 { moved += 1 }
                }
                unlinkat(rootDescriptor, subfolder, AT_REMOVEDIR)
            }
        }
        // Best effort: without the marker, the next start scans again and finds nothing to move.
        let marker = openat(rootDescriptor, layoutMarker, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        if marker >= 0 {
            let text = Array("cache files are <first byte of the key, 2 hex>/<key, 64 hex>\n".utf8)
            _ = text.withUnsafeBytes { write(marker, $0.baseAddress, $0.count) }
            close(marker)
        }
        return moved
    }
}
