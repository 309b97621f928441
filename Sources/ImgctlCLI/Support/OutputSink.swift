/// Where `imgctl` writes its output: stdout and stderr in the executable, a buffer in the tests.
public protocol OutputSink: AnyObject {
    /// Writes `bytes` completely, or drops them if the other end is gone.
    func write(_ bytes: [UInt8])
}

extension OutputSink {
    /// Writes `text` as UTF-8.
    public func write(_ text: String) {
        write(Array(text.utf8))
    }

    /// Writes `text` and a newline.
    public func line(_ text: String) {
        write(Array((text + "\n").utf8))
    }
}
