import ImgctlCLI

#if canImport(Glibc)
import Glibc
#endif

/// The `imgctl` executable: everything lives in ImgctlCLI. Synchronous on purpose: a client
/// that sends a request and waits for its reply needs no concurrency, and blocking socket calls
/// must not sit on Swift's cooperative pool.
@main
struct ImgctlMain {
    static func main() {
        let status = ImgctlCommand.run(arguments: Array(CommandLine.arguments.dropFirst()), context: .process())
        exit(status)
    }
}
