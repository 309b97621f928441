import ImgdCore
import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// The signals the daemon acts on (SIGTERM, SIGINT: stop; SIGHUP: reload), as an async stream.
///
/// Their default action is turned off first, then Dispatch watches them (signalfd-like, on its
/// own queue): a signal never interrupts a thread mid-work, and none is lost while the daemon is
/// busy, since each one is buffered in the stream.
public final class SignalStream: Sendable {
    public let signals: AsyncStream<Int32>
    private let sources: Locked<[DispatchSourceSignal]>

    /// Starts watching `numbers`.
    public init(_ numbers: [Int32] = [SIGTERM, SIGINT, SIGHUP]) {
        let (stream, continuation) = AsyncStream<Int32>.makeStream()
        signals = stream
        let queue = DispatchQueue(label: "imgd.signals")
        sources = Locked([])
        sources.withLock { sources in
            for number in numbers {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { continuation.yield(number) }
                source.activate()
                sources.append(source)
            }
        }
    }

    /// Stops watching.
    public func stop() {
        sources.withLock { sources in
            for source in sources { source.cancel() }
            sources.removeAll()
        }
    }
}
