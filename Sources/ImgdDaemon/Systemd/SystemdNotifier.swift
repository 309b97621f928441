import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// Tells systemd how the service is doing, through libsystemd's `sd_notify`: `READY=1`,
/// `STATUS=…`, `WATCHDOG=1`, `RELOADING=1`, `STOPPING=1`. Without `NOTIFY_SOCKET` (not under
/// systemd) every call does nothing.
public struct SystemdNotifier: Sendable {
    /// The watchdog interval systemd expects pings within (`WatchdogSec=`), if it set one for us.
    public let watchdogInterval: Duration?

    public init() {
        var microseconds: UInt64 = 0
        watchdogInterval = sd_watchdog_enabled(0, &microseconds) > 0 ? .microseconds(Int64(microseconds)) : nil
    }

    /// Start-up is done: the index is open and the socket listens.
    public func ready(status: String) { send("READY=1\nSTATUS=\(status)") }

    /// A status line `systemctl status` shows.
    public func status(_ text: String) { send("STATUS=\(text)") }

    /// The loop that would hang is alive.
    public func watchdog() { send("WATCHDOG=1") }

    /// Reloading configuration; `ready` follows.
    public func reloading() {
        send("RELOADING=1\nMONOTONIC_USEC=\(Self.monotonicMicroseconds())")
    }

    /// Shutting down.
    public func stopping() { send("STOPPING=1") }

    private func send(_ state: String) {
        _ = sd_notify(0, state)
    }

    /// `CLOCK_MONOTONIC` in microseconds, which systemd 253+ wants with `RELOADING=1` (252 ignores it).
    private static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }
}
