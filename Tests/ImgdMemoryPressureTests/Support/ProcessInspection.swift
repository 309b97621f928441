import Foundation

/// What this process holds, read from /proc: open descriptors and thread names. Lets tests check
/// that a monitor leaves nothing behind.
enum ProcessInspection {
    /// What descriptor `descriptor` refers to ("/tmp/x/fifo", "socket:[1234]"), or nil if closed.
    static func target(of descriptor: Int32) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")
    }

    /// The targets of every open descriptor.
    static func openTargets() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap { Int32($0).flatMap(target(of:)) }
    }

    /// The names of every thread of this process.
    static func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { task in
            (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }
}
