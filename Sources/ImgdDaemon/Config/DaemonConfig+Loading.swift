#if canImport(Glibc)
import Glibc
#endif
import ImgdCore
import ImgdTOML

extension DaemonConfig {
    /// The file the packaged unit names; unlike a file given by hand, it may be absent.
    public static let packagedConfigPath = "/etc/imgd/imgd.toml"

    /// The largest configuration file read (a guard against pointing `--config` at a big file).
    static let maximumFileBytes = 1 << 20

    /// The embedded default for `environment`, then `file` (if any, TOML 1.0), then `flags`
    /// (setting name and text, in order). An invalid document, an unknown key or table, or a
    /// value a setting cannot use is refused with `FILE:LINE` (or the flag).
    public static func load(
        environment: [String: String], file: String?, flags: [(key: String, value: String)]
    ) throws(ConfigError) -> DaemonConfig {
        var config = embedded(environment: environment)
        if let file, let text = try readFile(file) {
            let document: TOMLDocument
            do {
                document = try TOMLDocument(parsing: text)
            } catch {
                throw refusal(error, in: file, secret: false)
            }
            for entry in document.root.entries {
                if entry.key == "host" {
                    config.hosts = try HostSettings.tables(from: entry.value, origin: { "\(file):\($0)" }, line: entry.line, revealing: true)
                    continue
                }
                if entry.key == "window" {
                    config.windows = try CalendarWindowTables.windows(from: entry.value, origin: { "\(file):\($0)" }, line: entry.line)
                    continue
                }
                if entry.key == "quota" {
                    config.quotaTables = try QuotaTable.tables(from: entry.value, origin: { "\(file):\($0)" }, line: entry.line)
                    continue
                }
                try config.set(entry.key, to: entry.value, origin: "\(file):\(entry.line)")
            }
        }
        try config.apply(flags: flags)
        if let secrets = config.headersFile {
            config.hosts = HostSettings.merge(config.hosts, try readHostTables(secrets))
        }
        // Paths handed to clients (`get`'s path, `status`'s spool) must not depend on where the
        // client runs. The socket stays as given: a Unix socket path is limited to 107 bytes.
        config.spool = absolute(config.spool)
        config.cache = absolute(config.cache)
        config.state = absolute(config.state)
        return config
    }

    /// Sets each of `flags` (setting name and text, in order) as its flag gives it: the one
    /// parser of `imgd run`'s flags and `imgd prefetch`'s, with the settings' ranges and minima.
    /// A value a setting cannot use is refused naming the flag (`--disk-limit: …`).
    public mutating func apply(flags: [(key: String, value: String)]) throws(ConfigError) {
        for flag in flags {
            try set(flag.key, to: .string(flag.value), origin: "--\(flag.key)")
        }
    }

    /// The `[host."pattern"]` tables of the `headers-file` at `path`, which may hold nothing else.
    static func readHostTables(_ path: String) throws(ConfigError) -> [HostSettings] {
        do {
            try HostSettings.checkSecretFile(path)
        } catch {
            throw ConfigError(origin: path, reason: "headers-file: \(error.reason)")
        }
        guard let text = try readFile(path) else { return [] }
        let document: TOMLDocument
        do {
            document = try TOMLDocument(parsing: text)
        } catch {
            throw refusal(error, in: path, secret: true)
        }
        var tables: [HostSettings] = []
        for entry in document.root.entries {
            guard entry.key == "host" else {
                throw ConfigError(
                    origin: "\(path):\(entry.line)", reason: "a headers-file holds only [host.\"PATTERN\"] tables, not \(entry.key)")
            }
            tables = try HostSettings.tables(from: entry.value, origin: { "\(path):\($0)" }, line: entry.line, revealing: false)
        }
        return tables
    }

    /// A TOML error of `file` as a refusal naming `FILE:LINE`. In a file that holds secrets (the
    /// `headers-file`) and in a `headers` table of any file, the message names the key but
    /// never the text: an unquoted token (`X-Api-Key = sk_live_…`) would otherwise be quoted
    /// into the log.
    static func refusal(_ error: TOMLError, in file: String, secret: Bool) -> ConfigError {
        guard secret || HostSettings.isHeadersKey(error.key) else {
            return ConfigError(origin: "\(file):\(error.line)", reason: error.reason)
        }
        let key = error.key.isEmpty ? "" : error.keyText + ": "
        return ConfigError(
            origin: "\(file):\(error.line)", reason: key + error.reasonWithoutText + " (its text is not shown: it may be a secret)")
    }

    /// `path` against the working directory, `./` and trailing `/` dropped.
    static func absolute(_ path: String) -> String {
        var trimmed = path
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard !trimmed.hasPrefix("/") else { return trimmed }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard getcwd(&buffer, buffer.count) != nil else { return trimmed }
        let here = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        while trimmed.hasPrefix("./") { trimmed.removeFirst(2) }
        return trimmed == "." ? here : here + "/" + trimmed
    }

    /// The file's text; nil when it is the packaged default and absent.
    private static func readFile(_ path: String) throws(ConfigError) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT, path == packagedConfigPath { return nil }
            throw ConfigError(origin: path, reason: "cannot read the configuration file: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let got = retryingOnInterrupt { chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) } }
            guard got >= 0 else {
                throw ConfigError(origin: path, reason: "cannot read the configuration file: \(String(cString: strerror(errno)))")
            }
            if got == 0 { break }
            bytes += chunk[..<got]
            guard bytes.count <= maximumFileBytes else {
                throw ConfigError(origin: path, reason: "larger than 1 MiB: not a configuration file")
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigError(origin: path, reason: "not UTF-8 text")
        }
        return text
    }
}
