import Foundation
import ImgdTestSupport
import Testing

/// What the two programs load when they start, as the dynamic loader reports it
/// (`LD_DEBUG=files`): every library is paid for at every start (mapping, relocations, its
/// constructors), and `imgctl` runs once per image in scripts. Foundation with its ICU data
/// cost `imgctl --help` about 8 ms and 11 MiB; libcurl and the ~30 libraries it pulls in
/// (GnuTLS, Kerberos, LDAP, …) about 4 ms, in a client that parses no URL. (libcrypto costs
/// imgctl about 0.6 ms to load; its one digest of a reply's bytes goes through OpenSSL's direct
/// SHA-256, without EVP's provider set-up, which would cost 1.2 ms more.)
@Suite("Libraries loaded at start")
struct StartLibrariesTests {
    /// The file names the loader opened for `binary arguments`.
    static func loadedLibraries(_ binary: String, _ arguments: [String]) async throws -> [String] {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        var environment = BinaryRunner.imgctlEnvironment
        environment["LD_DEBUG"] = "files"
        let output = try await ChildProcess.run(binary, arguments, in: scratch.path, environment: environment, timeout: .seconds(60))
        #expect(output.status == 0, "\(output.stderr)")
        // "     1234:\tfile=libc.so.6 [0];  needed by /path/imgctl [0]"
        return output.stderr.split(separator: "\n").compactMap { line in
            guard let start = line.range(of: "file=") else { return nil }
            return String(line[start.upperBound...].prefix { $0 != " " })
        }
    }

    static let foundationAndICU = ["libFoundation.so", "libFoundationInternationalization.so", "lib_FoundationICU.so"]

    @Test("imgctl loads neither Foundation nor ICU, nor libcurl or ISA-L")
    func imgctlLibraries() async throws {
        let loaded = try await Self.loadedLibraries(BinaryRunner.imgctlPath, ["--version"])
        #expect(!loaded.isEmpty, "LD_DEBUG=files printed nothing")
        for unwanted in Self.foundationAndICU + ["libcurl.so.4", "libisal.so.2"] {
            #expect(!loaded.contains(unwanted), "imgctl loads \(unwanted): \(loaded)")
        }
    }

    @Test("imgd loads neither Foundation nor ICU")
    func imgdLibraries() async throws {
        let loaded = try await Self.loadedLibraries(BinaryRunner.imgdPath, ["--version"])
        #expect(!loaded.isEmpty, "LD_DEBUG=files printed nothing")
        for unwanted in Self.foundationAndICU {
            #expect(!loaded.contains(unwanted), "imgd loads \(unwanted): \(loaded)")
        }
    }
}
