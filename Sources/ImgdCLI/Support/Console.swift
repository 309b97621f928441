import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// Writes imgd's messages to stderr and keeps a live progress line at the bottom when stderr is
/// a terminal. One lock serialises the writes, so a message never lands inside the progress line.
public final class Console: Sendable {
    /// True when stderr is a terminal: only then is there a progress line.
    public let isInteractive: Bool
    /// Guards whether a progress line is on screen (it must be erased before a message).
    private let progressShown = Locked(false)

    public init() {
        isInteractive = isatty(STDERR_FILENO) == 1
    }

    /// Prints a line to stderr, above the progress line. The text is escaped (``EchoedText``):
    /// messages quote file names, URLs and lines of lists, which are anyone's bytes, and a raw
    /// newline or ESC among them would forge a line or rewrite the terminal. Call sites cut long
    /// quotes (``EchoedText/cut(_:limit:)``); escaping happens here, once, for every message.
    /// (`escapedTail`: text already escaped, written as it is: a log line's metadata.)
    public func message(_ text: String, escapedTail: String = "") {
        let text = EchoedText.escape(text, limit: nil) + escapedTail
        progressShown.withLock { shown in
            write(shown ? "\r\u{1B}[K" + text + "\n" : text + "\n")
            shown = false
        }
    }

    /// Replaces the progress line (terminals only).
    public func progress(_ text: String) {
        guard isInteractive else { return }
        progressShown.withLock { shown in
            write("\r\u{1B}[K" + text)
            shown = true
        }
    }

    /// Erases the progress line.
    public func clearProgress() {
        progressShown.withLock { shown in
            if shown { write("\r\u{1B}[K") }
            shown = false
        }
    }

    /// Prints a line to stdout (the summary: what scripts read).
    public func output(_ text: String) {
        var line = text + "\n"
        // stdout closed: nothing sensible left to do with the line.
        line.withUTF8 { bytes in _ = try? writeAll(STDOUT_FILENO, UnsafeRawBufferPointer(bytes)) }
    }

    private func write(_ text: String) {
        var text = text
        // stderr closed: nothing sensible left to do with the message.
        text.withUTF8 { bytes in _ = try? writeAll(STDERR_FILENO, UnsafeRawBufferPointer(bytes)) }
    }
}
