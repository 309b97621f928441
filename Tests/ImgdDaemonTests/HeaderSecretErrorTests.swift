import Foundation
import ImgdTestSupport
import Testing

@testable import ImgdDaemon

#if canImport(Glibc)
import Glibc
#endif

/// Errors in a `headers` table and anywhere in the `headers-file` name the file, the line and
/// the key, never the text: an unquoted token would otherwise be quoted into the log.
@Suite("Configuration: errors in headers tables and the headers-file never quote the value", .offThePool)
struct HeaderSecretErrorTests {
    static let secret = "sk_live_abc123"

    /// Loads a configuration naming a headers-file holding `secrets` (mode 600).
    static func loadWithHeadersFile(_ secrets: String) throws(ConfigError) -> DaemonConfig {
        let headers = DaemonConfigTests.scratchFile("headers.toml", secrets)
        chmod(headers, 0o600)
        let file = DaemonConfigTests.scratchFile("imgd.toml", "headers-file = \"\(headers)\"\n")
        return try DaemonConfig.load(environment: [:], file: file, flags: [])
    }

    @Test(
        "the headers-file: an unquoted token, a bad escape, a token alone on a line, a token where a rate or cap goes: FILE:LINE and the key, never the text",
        arguments: [
            ("[host.\"a.example\".headers]\nX-Api-Key = \(secret)\n", 2, "host.\"a.example\".headers.X-Api-Key: not a value (a string needs quotes)"),
            ("[host.\"a.example\"]\nheaders = { X-Api-Key = \(secret) }\n", 2, "host.\"a.example\".headers.X-Api-Key: not a value"),
            ("[host.\"a.example\"]\nheaders = { X-Api-Key = 1\(secret) }\n", 2, "host.\"a.example\".headers.X-Api-Key: not a number"),
            ("[host.\"a.example\"]\nheaders = { X-Api-Key = \"\(secret)\\q\" }\n", 2, "X-Api-Key: an unknown escape in a string"),
            ("[host.\"a.example\"]\nheaders = { X-Api-Key = \"\\uD800\(secret)\" }\n", 2, "X-Api-Key: an escape is not a Unicode scalar value"),
            ("[host.\"a.example\".headers]\n\(secret)\n", 2, "expected = after a key"),
            ("[host.\"a.example\"]\nrate = \"\(secret)\"\n", 2, "[host.\"a.example\"] rate: not a rate"),
            ("[host.\"a.example\"]\nmax-per-host = \"\(secret)\"\n", 2, "max-per-host: expected an integer from 1 to 1024, found a string"),
            ("[host.\"a.example\"]\nkey-ignore-query = [\"\(secret) x\"]\n", 2, "key-ignore-query: a query parameter name has no"),
        ])
    func headersFile(text: String, line: Int, mentions: String) {
        do {
            let config = try Self.loadWithHeadersFile(text)
            Issue.record("accepted: \(config.hosts)")
        } catch {
            #expect(error.origin.hasSuffix("/headers.toml:\(line)"), "\(error)")
            #expect(error.reason.contains(mentions), "\(error)")
            #expect(!"\(error)".contains(Self.secret), "\(error)")
        }
    }

    @Test("the configuration file: an unquoted token in a headers table is not quoted; elsewhere a bad word still is")
    func configurationFile() {
        for text in [
            "max-parallel = 2\n[host.\"a.example\"]\nheaders = { Referer = \"r\", X-Api-Key = \(Self.secret) }\n",
            "max-parallel = 2\n[host.\"a.example\".headers]\nX-Api-Key = \(Self.secret)\n",
        ] {
            do {
                let (config, _) = try DaemonConfigTests.load(text)
                Issue.record("accepted: \(config.hosts)")
            } catch {
                #expect(error.origin.hasSuffix("/imgd.toml:3"), "\(error)")
                #expect(error.reason.contains("X-Api-Key: not a value (a string needs quotes)"), "\(error)")
                #expect(!"\(error)".contains(Self.secret), "\(error)")
            }
        }
        // Outside a headers table a word that is not a value is still shown: it helps, and it is
        // no secret.
        do {
            _ = try DaemonConfigTests.load("log-level = debug\n")
            Issue.record("accepted")
        } catch {
            #expect(error.reason.contains("debug is not a value (a string needs quotes: \"debug\")"), "\(error)")
        }
    }
}
