import Foundation

/// A fresh folder under /tmp, removed by ``remove()``. Short paths, so a Unix socket inside fits
/// in `sun_path`'s 108 bytes.
struct TemporaryFolder {
    let path: String

    init() throws {
        var template = Array("/tmp/imgd-psi-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        path = String(cString: made)
    }

    /// Writes `text` to `name` by rename, so a reader never sees a half-written file.
    func write(_ text: String, to name: String) throws {
        let target = path + "/" + name
        let temporary = target + ".new"
        try Data(text.utf8).write(to: URL(fileURLWithPath: temporary))
        guard rename(temporary, target) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
