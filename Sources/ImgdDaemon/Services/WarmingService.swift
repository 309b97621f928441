import ImgdNetwork
import Logging
import ServiceLifecycle

/// The front of the daemon's ordered teardown: what takes work in and does it — the spool, the
/// control socket's intake and the downloader. It runs while the daemon runs; the group shuts it
/// down first (it is the last service but the signals), and ``StateService`` finishes the
/// teardown last.
///
/// At shutdown (graceful, or the group cancelled): `STOPPING=1`; the spool stops taking lists
/// and writes every outcome received (lists in progress stay active and resume at the next
/// start); the sockets (control, HTTP) stop accepting and tell their connections; then the transfers are
/// cancelled — a request waiting on a download is answered by that, and its URL stays pending
/// for the next run — within ``Daemon/stopDeadline``, after which the daemon exits anyway.
struct WarmingService: Service {
    let notifier: SystemdNotifier
    let spool: SpoolService
    let server: ControlServer
    /// The HTTP face, when `http-listen` is set: it stops accepting beside the control socket.
    let http: HTTPFaceServer?
    let downloader: Downloader
    let logger: Logger

    func run() async {
        try? await gracefulShutdown()
        notifier.stopping()
        await spool.stop()
        await server.stopAccepting()
        await http?.stopAccepting()
        if await !downloader.shutdown(within: Daemon.stopDeadline) {
            logger.warning("transfers did not stop within \(Daemon.stopDeadline); exiting anyway")
        }
    }
}
