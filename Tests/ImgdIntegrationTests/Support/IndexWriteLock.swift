import ImgdCore
import Foundation
import ImgdTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// `sqlite3` holding the write lock of a database (`BEGIN IMMEDIATE`) until ``release()``: the
/// daemon's readers go on (WAL), its writers wait in their busy handler. How a test holds a
/// cache operation at the moment it writes the index, with the real SQLite in between.
///
/// `sqlite3` reads its commands from a FIFO the test keeps open: the lock is taken with the
/// first line, and releasing it is the last line and the end of input, so `sqlite3` exits and
/// nothing it started outlives it.
final class IndexWriteLock: Sendable {
    private let process: ChildProcess
    /// Made by `sqlite3` once it holds the lock.
    private let marker: String
    private let logPath: String
    /// The FIFO's write end (`sqlite3`'s input); -1 once released.
    private let commands: Locked<Int32>

    /// Starts `sqlite3` on `index`, with its FIFO, marker and log in `folder`.
    init(index: String, in folder: String) throws {
        let fifo = folder + "/index-lock.commands"
        marker = folder + "/index-lock.held"
        logPath = folder + "/index-lock.log"
        guard mkfifo(fifo, 0o600) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        // Read-write, so this open does not wait for sqlite3 to open the other end.
        let fd = open(fifo, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        commands = Locked(fd)
        do {
            process = try ChildProcess(
                "/bin/sh", ["-c", #"exec /usr/bin/sqlite3 -cmd ".timeout 10000" "$0" < "$1""#, index, fifo],
                stdout: .file(logPath), stderr: .file(logPath))
        } catch {
            close(fd)
            throw error
        }
        send("BEGIN IMMEDIATE;\n.shell touch '\(marker)'\n")
    }

    deinit {
        release()
        if process.isRunning { kill(process.pid, SIGKILL) }
    }

    /// True once `sqlite3` holds the lock.
    var isHeld: Bool { FileManager.default.fileExists(atPath: marker) }

    /// What `sqlite3` wrote (errors, if any).
    var output: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Ends the transaction and the input: `sqlite3` lets go and exits. Calling it again does nothing.
    func release() {
        send("COMMIT;\n")
        commands.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    private func send(_ text: String) {
        commands.withLock { fd in
            guard fd >= 0 else { return }
            let bytes = Array(text.utf8)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        }
    }
}
