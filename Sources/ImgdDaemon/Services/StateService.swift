import ImgdStore
import Logging
import ServiceLifecycle

/// The end of the daemon's ordered teardown: the state that outlives every other service — the
/// lists' database, the cache index and the lock on the state folder. The group starts it first
/// and so shuts it down last, once nothing can use the index any more: it writes the progress
/// the downloader's shutdown answered (and `add`'s last pins), closes the index (marking the stop clean), and releases
/// the lock.
struct StateService: Service {
    let spool: SpoolService
    let pins: PinWriter
    let disk: DiskCache
    let stateLock: CacheLock
    let logger: Logger

    func run() async {
        try? await gracefulShutdown()
        await close()
        logger.info("stopped")
    }

    /// Writes the last progress, closes the index (a clean stop) and releases the state folder.
    func close() async {
        await spool.finalFlush()
        pins.drain()
        do {
            try disk.close()
        } catch {
            logger.warning("closing the cache index failed (the next start checks entries): \(error)")
        }
        stateLock.release()
    }
}
