import Foundation

/// A fresh, empty folder for one test under the system's temporary folder, named
/// `PREFIX-UUID`; the test removes it with ``remove()`` (a `defer` beside the `init`).
///
/// Made with the process's umask (0755 as tests run), not `mkdtemp`'s 0700: tests that run
/// `imgctl` or a child as a second user need to reach into it. A value, not an owner: the folder
/// outlives every copy until ``remove()``.
public struct ScratchFolder: Sendable {
    /// The folder's absolute path.
    public let path: String

    /// Makes the folder; `prefix` names what it is for (`imgd-index`, `imgd-spill`), which helps
    /// when one is left behind.
    public init(_ prefix: String = "imgd-it") throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// The path of `relative` inside the folder (which need not exist).
    public func path(_ relative: String) -> String {
        path + "/" + relative
    }

    /// Writes `text` to the file `name` in the folder, replacing it; returns its path.
    @discardableResult
    public func write(_ name: String, _ text: String) throws -> String {
        try text.write(toFile: path + "/" + name, atomically: true, encoding: .utf8)
        return path + "/" + name
    }

    /// Regular files under `relative`, recursively, excluding the temp folder: a cache folder's
    /// images (in its fan-out folders; the root's own files, index, lock and layout marker, and
    /// `tmp/` are not images).
    public func files(under relative: String) -> [String] {
        let root = path + "/" + relative
        let enumerator = FileManager.default.enumerator(atPath: root)
        var found: [String] = []
        while let item = enumerator?.nextObject() as? String {
            var isFolder: ObjCBool = false
            if item.contains("/"), !item.hasPrefix("tmp/"), FileManager.default.fileExists(atPath: root + "/" + item, isDirectory: &isFolder), !isFolder.boolValue {
                found.append(item)
            }
        }
        return found
    }

    /// Removes the folder and everything in it; nothing if it is gone already.
    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}
