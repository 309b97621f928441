import Foundation

/// Certificates for TLS tests, made once per test process with the `openssl` command (Debian's
/// `openssl` package): a test CA, and server certificates (P-256 keys) signed by it — one valid
/// for `localhost` and `127.0.0.1`, one expired, one for another host name — and one valid for
/// `127.0.0.1` but signed by a CA nobody trusts.
///
/// Clients trust only ``caFile`` (libcurl's `CURLOPT_CAINFO`); the machine's trust store is never
/// touched.
public struct TestCertificates: Sendable {
    /// A certificate and its private key, as PEM files.
    public struct Pair: Sendable {
        public let certificate: String
        public let key: String
    }

    /// Where the files are.
    public let folder: String
    /// The test CA's certificate: the one file a client must trust.
    public var caFile: String { folder + "/ca.pem" }
    /// For `localhost` and `127.0.0.1`, valid for 30 days.
    public let valid: Pair
    /// For `localhost` and `127.0.0.1`, expired since yesterday.
    public let expired: Pair
    /// For `wrong.example` only.
    public let wrongHost: Pair
    /// For `localhost` and `127.0.0.1`, signed by another CA.
    public let untrusted: Pair

    /// Why the certificates could not be made.
    public struct Failure: Error, CustomStringConvertible {
        public let step: String
        public let output: String
        public var description: String { "openssl \(step) failed: \(output)" }
    }

    /// The process's certificates, made on first use.
    public static func shared() async throws -> TestCertificates { try await made.value }

    private static let made = Task { try await make() }

    private static func make() async throws -> TestCertificates {
        let folder = try ScratchFolder("imgd-tls").path
        func openssl(_ step: String, _ arguments: [String]) async throws {
            let output = try await ChildProcess.run("/usr/bin/openssl", arguments, in: folder)
            guard output.status == 0 else { throw Failure(step: step, output: output.stderr) }
        }
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        for ca in ["ca", "rogue-ca"] {
            try await openssl("req (\(ca))", ["req", "-x509"] + key + [
                "-keyout", "\(ca).key", "-out", "\(ca).pem", "-subj", "/CN=imgd test \(ca)", "-days", "30",
            ])
        }
        func server(_ name: String, names: String, days: Int, ca: String = "ca") async throws -> Pair {
            try "subjectAltName=\(names)\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                .write(toFile: "\(folder)/\(name).ext", atomically: true, encoding: .utf8)
            try await openssl("req (\(name))", ["req", "-new"] + key + [
                "-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=\(name)",
            ])
            // A negative -days puts notAfter before notBefore: a certificate already expired.
            try await openssl("x509 (\(name))", [
                "x509", "-req", "-in", "\(name).csr", "-CA", "\(ca).pem", "-CAkey", "\(ca).key", "-CAcreateserial",
                "-out", "\(name).pem", "-days", "\(days)", "-extfile", "\(name).ext",
            ])
            return Pair(certificate: "\(folder)/\(name).pem", key: "\(folder)/\(name).key")
        }
        let local = "DNS:localhost,IP:127.0.0.1"
        return TestCertificates(
            folder: folder,
            valid: try await server("valid", names: local, days: 30),
            expired: try await server("expired", names: local, days: -1),
            wrongHost: try await server("wrong-host", names: "DNS:wrong.example", days: 30),
            untrusted: try await server("untrusted", names: local, days: 30, ca: "rogue-ca"))
    }
}
