// swift-tools-version:6.0
import PackageDescription

/// Settings shared by every Swift target of ours: Swift 6 mode (strict concurrency) and no warnings.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .unsafeFlags(["-warnings-as-errors"]),
]

/// The two programs, in release builds: the Swift runtime, Dispatch and FoundationEssentials
/// linked in (`-static-stdlib`), so a start binds no symbols across a dozen Swift libraries at
/// run time (`imgctl --help`: 7.6 → 5.9 ms of CPU) and an installed binary needs no Swift
/// toolchain beside it. FoundationEssentials (swift-argument-parser's) needs three static
/// libraries that `-static-stdlib` does not name; they come after it, as an archive's
/// dependencies must. Debug builds (the tests') link dynamically, which links faster.
let releaseLinkerSettings: [LinkerSetting] = [
    .unsafeFlags(
        ["-static-stdlib", "-l_FoundationCShims", "-l_FoundationCollections", "-lswiftSynchronization"],
        .when(configuration: .release)),
]

let package = Package(
    name: "imgd",
    products: [
        .executable(name: "imgd", targets: ["imgd"]),
        .executable(name: "imgctl", targets: ["imgctl"]),
        /// imgd's client library: connect, get (with a verified descriptor), add, subscribe;
        /// blocking (`ImgdConnection`) and async/await (`ImgdAsyncClient`).
        .library(name: "ImgdClient", targets: ["ImgdClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        // Tests only: the test server speaks TLS and HTTP/2 (ALPN) as CDNs do.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.29.0"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.35.0"),
    ],
    targets: [
        // MARK: C libraries, reached through pkg-config.
        .systemLibrary(
            name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(
            name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CSystemd", path: "Sources/CSystemd", pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]),
        /// Intel's ISA-L, for the CRC-32 of PNG chunks: folded with carry-less multiplication,
        /// about four times zlib's speed here (2.3 µs against 9.9 µs for a 22 KB image).
        .systemLibrary(
            name: "CISAL", path: "Sources/CISAL", pkgConfig: "libisal",
            providers: [.apt(["libisal-dev"])]),
        .systemLibrary(
            name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        /// Typed, non-variadic wrappers for libcurl's variadic calls (Swift cannot call C varargs).
        .target(name: "CCurlShim", dependencies: ["CCurl"]),
        /// Descriptors passed over a Unix socket (SCM_RIGHTS; the CMSG macros do not import):
        /// the daemon's `get` with `"fd": true` and the client's receiving end. libc only.
        .target(name: "CDescriptorPassing"),

        // MARK: Layers.
        /// What `imgctl` shares with the daemon and nothing more: sizes and durations, text
        /// escaping, base64, Unix socket addresses, the version. No Foundation and no C
        /// library, so `imgctl` loads neither libcurl (and its ~30 libraries) nor ISA-L.
        /// ImgdCore re-exports it.
        .target(name: "ImgdBase", swiftSettings: swiftSettings),
        /// Value types and pure logic: URLs and cache keys, image validation, link lists.
        .target(
            name: "ImgdCore", dependencies: ["ImgdBase", "CCurlShim", "COpenSSL", "CISAL"],
            swiftSettings: swiftSettings),
        /// The cache: the folder on disk (layout, temp files, publishing by rename), its SQLite
        /// index, eviction, and the memory tier.
        .target(
            name: "ImgdStore",
            dependencies: [
                "ImgdCore", "CSQLite",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings),
        /// Memory pressure, as the system signals it: PSI triggers and polling, systemd's MemoryPressureWatch.
        .target(
            name: "ImgdMemoryPressure", dependencies: ["ImgdCore"],
            swiftSettings: swiftSettings),
        /// TOML 1.0 (the configuration file's format): documents parsed strictly into tables and
        /// values, each key with its line. Pure Swift, no dependencies.
        .target(name: "ImgdTOML", swiftSettings: swiftSettings),
        /// The control socket's wire format: JSON values, their parser and encoder, shared by the
        /// daemon and `imgctl`.
        .target(
            name: "ImgdProtocol",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: swiftSettings),
        /// The downloader: libcurl's multi interface on one thread, scheduling, retries, coalescing.
        .target(
            name: "ImgdNetwork",
            dependencies: [
                "ImgdCore", "ImgdStore", "CCurlShim", "COpenSSL",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings),
        /// The daemon's services: the cache's upkeep, memory pressure, the spool, the control socket,
        /// systemd's notifications, started in order and stopped in reverse.
        .target(
            name: "ImgdDaemon",
            dependencies: [
                "ImgdCore", "ImgdProtocol", "ImgdTOML", "ImgdStore", "ImgdMemoryPressure", "ImgdNetwork", "CSystemd",
                "CDescriptorPassing",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings),
        /// The command-line front ends (`imgd prefetch`), kept out of the executable so they read as a library.
        .target(
            name: "ImgdCLI",
            dependencies: [
                "ImgdCore", "ImgdStore", "ImgdNetwork", "ImgdDaemon",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "imgd", dependencies: ["ImgdCLI"],
            swiftSettings: swiftSettings, linkerSettings: releaseLinkerSettings),
        /// imgd's client library (the product ImgdClient): one blocking connection, and an
        /// async/await client whose connections each run on a thread of their own. No
        /// Foundation, no NIOPosix, no libcurl: imgctl links it and starts no concurrency
        /// runtime unless the async layer is used. Its API exposes ImgdProtocol's `JSONValue`,
        /// so ImgdProtocol is part of the promise too.
        .target(
            name: "ImgdClient", dependencies: ["ImgdBase", "ImgdProtocol", "CDescriptorPassing"],
            swiftSettings: swiftSettings),
        /// The control socket's command-line client, kept out of the executable so it reads as a library.
        .target(
            name: "ImgctlCLI",
            dependencies: [
                "ImgdBase", "ImgdProtocol", "ImgdClient", "COpenSSL", "CDescriptorPassing",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "imgctl", dependencies: ["ImgctlCLI"],
            swiftSettings: swiftSettings, linkerSettings: releaseLinkerSettings),
        /// One fuzz target per parser of untrusted bytes (control lines, link lists, images, the
        /// configuration), calling the daemon's own code; replayed by the tests, fuzzed by `make fuzz`.
        .target(
            name: "ImgdFuzz",
            dependencies: [
                "ImgdCore", "ImgdProtocol", "ImgdDaemon",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        /// libFuzzer's entry point when built with `-D IMGD_FUZZING -sanitize=fuzzer`; otherwise
        /// `imgd-fuzz TARGET FILE...` replays inputs.
        .executableTarget(
            name: "imgd-fuzz", dependencies: ["ImgdFuzz"],
            swiftSettings: swiftSettings),
        /// The index at scale (1,000,000 entries): open time, lookups, lookups during eviction.
        .executableTarget(
            name: "imgd-index-bench", dependencies: ["ImgdStore", "ImgdCore"],
            swiftSettings: swiftSettings),
        /// Lookups over the control socket: `get` requests per second and latency, from 1 to 64
        /// clients, pipelined or not (the side-by-side with redis-benchmark is bench/lookup-bench.sh).
        .executableTarget(
            name: "imgd-lookup-bench", dependencies: ["ImgdCore"],
            swiftSettings: swiftSettings),

        // MARK: Testing.
        /// glibc's posix_spawn extensions (close every other descriptor, change folder), for
        /// starting the real binaries from tests without Foundation's Process.
        .target(name: "CSpawnShim"),
        /// A real HTTP server on 127.0.0.1 (plain HTTP/1.1, or TLS with HTTP/2 and HTTP/1.1 by
        /// ALPN) with scripted misbehaviour, test certificates, generated images, and child processes.
        .target(
            name: "ImgdTestSupport",
            dependencies: [
                "CSpawnShim",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            ],
            // Optimised in debug builds too: the test server makes every image body it sends
            // (a CRC-32 over up to 64 MB, byte by byte) on its event loop, in a suite that shares
            // 2 cores between ~16 tests at once; a 40 MB PNG takes 0.60 s unoptimised, 0.18 s so.
            swiftSettings: swiftSettings + [.unsafeFlags(["-O"], .when(configuration: .debug))]),
        /// The test support itself: its polls and scratch folders, and the test server through
        /// the real `curl`.
        .testTarget(
            name: "ImgdTestSupportTests", dependencies: ["ImgdTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "ImgdCoreTests", dependencies: ["ImgdCore", "ImgdTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "ImgdStoreTests",
            dependencies: [
                "ImgdStore", "ImgdCore", "ImgdTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "ImgdMemoryPressureTests", dependencies: ["ImgdMemoryPressure", "ImgdCore", "ImgdTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "ImgdNetworkTests",
            dependencies: ["ImgdNetwork", "ImgdStore", "ImgdCore", "ImgdTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "ImgdDaemonTests",
            dependencies: [
                "ImgdDaemon", "ImgdProtocol", "ImgdTOML", "ImgdStore", "ImgdMemoryPressure", "ImgdCore", "ImgdTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        /// TOML 1.0 documents, valid and invalid, most from the specification.
        .testTarget(
            name: "ImgdTOMLTests", dependencies: ["ImgdTOML", "ImgdTestSupport"],
            swiftSettings: swiftSettings),
        /// Every fuzz seed and reproducer (Tests/Fuzz/), replayed through its target.
        .testTarget(
            name: "ImgdFuzzTests", dependencies: ["ImgdFuzz", "ImgdTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "ImgdCLITests", dependencies: ["ImgdCLI", "ImgdDaemon", "ImgdTestSupport"],
            swiftSettings: swiftSettings),
        /// Fixtures/: replies recorded from the real daemon (ImgdIntegrationTests checks they
        /// still match it), read by path.
        .testTarget(
            name: "ImgctlTests", dependencies: ["ImgctlCLI", "ImgdClient", "ImgdCore", "ImgdProtocol", "ImgdTestSupport"], exclude: ["Fixtures"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "ImgdIntegrationTests",
            dependencies: ["imgd", "imgctl", "ImgctlCLI", "ImgdClient", "ImgdCore", "ImgdProtocol", "ImgdTestSupport"],
            swiftSettings: swiftSettings),
    ]
)
