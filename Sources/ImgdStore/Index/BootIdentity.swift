#if canImport(Glibc)
import Glibc
#endif

/// Which boot of the machine this is: the kernel's random boot ID
/// (`/proc/sys/kernel/random/boot_id`), new at every boot and the same for every process (and
/// container) of one.
///
/// Why the cache needs it: data a process wrote and did not sync is safe in the page cache until
/// the kernel writes it back — unless the machine goes down first. So a stop that did not sync
/// can still vouch for its files to any later run *of the same boot*; after a reboot (a power cut
/// among the possibilities), the files are checked before use. See ``CacheIndex/close(syncedToDisk:)``.
enum BootIdentity {
    /// The first 64 bits of this boot's ID, or nil when the kernel does not say (no `/proc`): a
    /// stop must then sync to vouch for its files.
    static let current: Int? = readBootID()

    private static func readBootID() -> Int? {
        let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        // "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx\n": the first 16 hex digits, dashes skipped.
        var value: UInt64 = 0
        var digits = 0
        for byte in bytes.prefix(count) where digits < 16 {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "-"): continue
            default: return nil
            }
            value = value << 4 | UInt64(digit)
            digits += 1
        }
        return digits == 16 ? Int(truncatingIfNeeded: value) : nil
    }
}
