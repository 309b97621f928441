import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Carrying the warm set (Protocol.md, "Carrying the warm set"): `imgctl export` from one real
/// daemon, `imgctl import` into another, `imgctl manifest --compare`, against the test origin.
@Suite("imgd: export, import and manifest of the warm set (the real binaries)", .timeLimit(.minutes(10)), .offThePool)
struct WarmSetCarryTests {
    // 40 KB to 160 KB, 500 KB in all: the export spans chunks (256 KiB), and a header falls near a chunk's end.
    static let routes = (0..<5).map { "/img/carry-\($0).png?bytes=\(40000 + $0 * 30000)" }

    /// A daemon with its socket at `scratch/imgd.sock`.
    static func start(_ scratch: ScratchFolder, arguments: [String] = []) async throws -> DaemonProcess {
        chmod(scratch.path, 0o755)
        let socket = scratch.path + "/imgd.sock"
        return try await DaemonProcess.start(in: scratch.path, arguments: ["--socket", socket] + arguments, socket: socket)
    }

    /// Runs `script` with /bin/sh in `folder`, imgctl's folder first on PATH.
    static func sh(_ script: String, in folder: String) async throws -> ChildProcess.Output {
        let binaries = URL(fileURLWithPath: BinaryRunner.imgctlPath).deletingLastPathComponent().path
        return try await ChildProcess.run(
            "/bin/sh", ["-c", script], in: folder,
            environment: DaemonProcess.environment(adding: ["PATH": binaries + ":/usr/bin:/bin"]), timeout: .seconds(120))
    }

    /// A daemon A with `routes` cached, and its export of them at `scratch/warm.tar`.
    static func exported(_ server: TestHTTPServer, _ scratch: ScratchFolder, routes: [String] = routes) async throws -> (DaemonProcess, String) {
        let daemon = try await start(scratch)
        for route in routes { _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url(route))"}"#) }
        let tar = scratch.path + "/warm.tar"
        let run = try await sh("imgctl export --socket \(daemon.socket) --all > \(tar)", in: scratch.path)
        try #require(run.status == 0, "export: exit \(run.status): \(run.stderr)")
        #expect(run.stderr.contains("exported \(routes.count) entries"), "\(run.stderr)")
        return (daemon, tar)
    }

    /// Each member of a ustar file: name, data offset, size.
    static func members(_ bytes: [UInt8]) -> [(name: String, offset: Int, size: Int)] {
        var found: [(String, Int, Int)] = []
        var offset = 0
        while offset + 512 <= bytes.count, bytes[offset] != 0 {
            let name = String(decoding: bytes[offset..<(offset + 100)].prefix { $0 != 0 }, as: UTF8.self)
            let sizeText = String(decoding: bytes[(offset + 124)..<(offset + 135)].prefix { $0 != 0 }, as: UTF8.self)
            let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 8) ?? 0
            found.append((name, offset + 512, size))
            offset += 512 + (size + 511) / 512 * 512
        }
        return found
    }

    static func entries(_ daemon: DaemonProcess) async throws -> Int {
        let status = try await daemon.result(#"{"cmd":"status"}"#)
        return (status["cache"] as? [String: Any])?["entries"] as? Int ?? -1
    }

    @Test("export from A, import into B: GNU tar lists it, B serves every URL with no request to the origin; a second import skips all; manifest --compare tells the difference before and none after")
    func carry() async throws {
        try await withRunningServer { server in
            let scratchA = try ScratchFolder(), scratchB = try ScratchFolder()
            defer { scratchA.remove(); scratchB.remove() }
            let (a, tar) = try await Self.exported(server, scratchA)
            defer { a.killIfRunning() }
            let listed = try await Self.sh("tar -tf \(tar)", in: scratchA.path)
            let names = listed.stdout.split(separator: "\n").map(String.init)
            #expect(listed.status == 0 && names.count == 6 && names.first == "imgd-manifest.jsonl", "\(listed.stdout)\(listed.stderr)")

            let b = try await Self.start(scratchB)
            defer { b.killIfRunning() }
            let manifestA = scratchA.path + "/a.jsonl"
            let saved = try await Self.sh("imgctl manifest --socket \(a.socket) --all > \(manifestA)", in: scratchA.path)
            #expect(saved.status == 0, "\(saved.stderr)")
            let before = try await Self.sh("imgctl manifest --socket \(b.socket) --all --compare \(manifestA)", in: scratchB.path)
            #expect(before.status == 1 && before.stdout.split(separator: "\n").filter { $0.hasPrefix("missing-here ") }.count == 5, "\(before.stdout)\(before.stderr)")

            let requests = server.totalRequests
            let imported = try await Self.sh("imgctl import --socket \(b.socket) \(tar)", in: scratchB.path)
            #expect(imported.status == 0, "exit \(imported.status): \(imported.stdout)\(imported.stderr)\n\(b.log)")
            #expect(imported.stdout.contains("taken 5 ") && imported.stdout.contains("refused 0"), "\(imported.stdout)")
            for route in Self.routes {
                let reply = try await b.result(#"{"cmd":"get","url":"\#(server.url(route))","data":true}"#)
                #expect(reply["source"] as? String == "disk", "\(route): \(reply)")
                let data = try #require(reply["data"] as? String)
                #expect(Data(base64Encoded: data).map(Array.init) == TestHTTPServer.body(for: route))
            }
            #expect(server.totalRequests == requests, "B asked the origin: \(server.requestLog.suffix(5))")

            let again = try await Self.sh("imgctl import --socket \(b.socket) < \(tar)", in: scratchB.path)
            #expect(again.status == 0 && again.stdout.contains("taken 0 ") && again.stdout.contains("skipped 5 "), "\(again.stdout)\(again.stderr)")
            let after = try await Self.sh("imgctl manifest --socket \(b.socket) --all --compare \(manifestA)", in: scratchB.path)
            #expect(after.status == 0 && after.stdout.isEmpty, "\(after.stdout)\(after.stderr)")
            #expect(await b.stop() == 0, "log:\n\(b.log)")
            #expect(await a.stop() == 0, "log:\n\(a.log)")
        }
    }

    @Test("an import is charged to the importing uid (status.users), and under a quota an entry larger than the uid may hold is refused with quota_exceeded's reason while the others are taken")
    func importIsCharged() async throws {
        try await withRunningServer { server in
            let scratchA = try ScratchFolder(), scratchB = try ScratchFolder()
            defer { scratchA.remove(); scratchB.remove() }
            let (a, tar) = try await Self.exported(server, scratchA)
            defer { a.killIfRunning() }
            // Root may hold 150 KB. Each entry is judged alone against it: only the 160 KB one
            // is larger (the 40 to 130 KB ones are taken, and the quota pass then evicts root's
            // own oldest ones down to it).
            try scratchB.write("imgd.toml", "[quota.\"uid:0\"]\nlimit = \"150KB\"\n")
            let b = try await Self.start(scratchB, arguments: ["--config", scratchB.path + "/imgd.toml"])
            defer { b.killIfRunning() }
            let imported = try await Self.sh("imgctl import --socket \(b.socket) \(tar)", in: scratchB.path)
            #expect(imported.status == 1 && imported.stdout.contains("taken 4 ") && imported.stdout.contains("refused 1"), "\(imported.stdout)")
            #expect(imported.stderr.contains("more than uid 0 may hold"), "\(imported.stderr)")
            // Charged to root, and held under its quota.
            #expect(await eventually(timeout: .seconds(10)) {
                let users = (try? await b.result(#"{"cmd":"status"}"#))?["users"] as? [[String: Any]] ?? []
                guard let root = users.first(where: { $0["uid"] as? Int == 0 }) else { return false }
                return (root["bytes"] as? Int ?? .max) <= 150_000 && (root["entries"] as? Int ?? 0) >= 1
            })
            #expect(await b.stop() == 0, "log:\n\(b.log)")
            #expect(await a.stop() == 0)
        }
    }

    @Test("one byte flipped in a member: that entry is refused (SHA-256), the others are taken; a stream cut inside a member stops with truncated and keeps what came before; an entry cached with another digest is refused without --replace")
    func damaged() async throws {
        try await withRunningServer { server in
            let scratchA = try ScratchFolder(), scratchB = try ScratchFolder()
            defer { scratchA.remove(); scratchB.remove() }
            let (a, tar) = try await Self.exported(server, scratchA)
            defer { a.killIfRunning() }
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: tar)))
            let members = Self.members(bytes)
            try #require(members.count == 6)
            let b = try await Self.start(scratchB)
            defer { b.killIfRunning() }

            var flipped = bytes
            flipped[members[2].offset + members[2].size / 2] ^= 0x01
            let flippedPath = scratchB.path + "/flipped.tar"
            try Data(flipped).write(to: URL(fileURLWithPath: flippedPath))
            let run = try await Self.sh("imgctl import --socket \(b.socket) \(flippedPath)", in: scratchB.path)
            #expect(run.status == 1, "\(run.stdout)\(run.stderr)")
            #expect(run.stdout.contains("taken 4 ") && run.stdout.contains("refused 1"), "\(run.stdout)")
            #expect(run.stderr.contains("refused \(members[2].name)") && run.stderr.contains("SHA-256"), "\(run.stderr)")
            #expect(try await Self.entries(b) == 4)

            // Cut in the middle of the (undamaged) second entry: the first is already here
            // (skipped), the stream stops as truncated, and no partial entry is published.
            let cut = Array(bytes[0..<(members[2].offset + members[2].size / 2)])
            let cutPath = scratchB.path + "/cut.tar"
            try Data(cut).write(to: URL(fileURLWithPath: cutPath))
            let truncated = try await Self.sh("imgctl import --socket \(b.socket) \(cutPath)", in: scratchB.path)
            #expect(truncated.status == 1 && truncated.stderr.contains("truncated"), "\(truncated.stdout)\(truncated.stderr)")
            #expect(try await Self.entries(b) == 4)
            let temp = try FileManager.default.contentsOfDirectory(atPath: scratchB.path + "/imgd-data/cache/tmp")
            #expect(temp.isEmpty, "temp files left: \(temp)")

            // The flipped entry's member again, with its manifest row claiming another digest
            // than what B now has cached: refused without --replace.
            let manifest = String(decoding: bytes[members[0].offset..<(members[0].offset + members[0].size)], as: UTF8.self)
            let key = members[1].name
            let row = try #require(manifest.split(separator: "\n").first { $0.contains(key) })
            let realDigest = SHA256Digest(of: bytes[members[1].offset..<(members[1].offset + members[1].size)]).hex
            try #require(row.contains(realDigest))
            // A row for that key with another entry's bytes and digest: a different digest.
            let other = members[3]
            let otherBytes = Array(bytes[other.offset..<(other.offset + other.size)])
            let otherRow = try #require(manifest.split(separator: "\n").first { $0.contains(other.name) })
            let otherDigest = SHA256Digest(of: otherBytes).hex
            let forged = String(otherRow).replacingOccurrences(of: other.name, with: key)
            #expect(forged.contains(otherDigest))
            let forgedTar = scratchB.path + "/forged"
            try FileManager.default.createDirectory(atPath: forgedTar, withIntermediateDirectories: true)
            try (forged + "\n").write(toFile: forgedTar + "/imgd-manifest.jsonl", atomically: true, encoding: .utf8)
            try Data(otherBytes).write(to: URL(fileURLWithPath: forgedTar + "/" + key))
            let made = try await Self.sh("cd \(forgedTar) && tar --format=ustar -cf ../forged.tar imgd-manifest.jsonl \(key)", in: scratchB.path)
            try #require(made.status == 0, "\(made.stderr)")
            let refusedReplace = try await Self.sh("imgctl import --socket \(b.socket) forged.tar", in: scratchB.path)
            #expect(refusedReplace.status == 1 && refusedReplace.stderr.contains("another digest"), "\(refusedReplace.stdout)\(refusedReplace.stderr)")
            let replaced = try await Self.sh("imgctl import --replace --socket \(b.socket) forged.tar", in: scratchB.path)
            #expect(replaced.status == 0 && replaced.stdout.contains("taken 1 "), "\(replaced.stdout)\(replaced.stderr)")
            #expect(await b.stop() == 0, "log:\n\(b.log)")
            #expect(await a.stop() == 0, "log:\n\(a.log)")
        }
    }

    @Test("a GNU tar with hostile members (../ names, a symlink, a FIFO, a folder, a name not in the manifest) refuses each by name, takes the good ones, and writes nothing outside the cache; a huge declared size stops the import; a tar that is not an export is refused whole")
    func hostile() async throws {
        try await withRunningServer { server in
            let scratchA = try ScratchFolder(), scratchB = try ScratchFolder()
            defer { scratchA.remove(); scratchB.remove() }
            let (a, tar) = try await Self.exported(server, scratchA, routes: Array(Self.routes.prefix(2)))
            defer { a.killIfRunning() }
            let b = try await Self.start(scratchB)
            defer { b.killIfRunning() }
            let work = scratchB.path + "/work/inner"
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
            let unpacked = try await Self.sh("cd \(work) && tar -xf \(tar) && ls", in: scratchB.path)
            try #require(unpacked.status == 0, "\(unpacked.stderr)")
            let keys = unpacked.stdout.split(separator: "\n").map(String.init).filter { $0 != "imgd-manifest.jsonl" }
            try #require(keys.count == 2)
            // Beside the two good members: names the manifest does not have (one a symlink to
            // /etc/passwd named like a key), a path out of the folder, a FIFO, a folder.
            let made = try await Self.sh(
                """
                cd \(work) && echo evil > ../evil && ln -s /etc/passwd \(String(repeating: "a", count: 64)) && mkfifo fifo && mkdir folder \
                && echo stranger > stranger \
                && tar --format=gnu -P -cf ../hostile.tar imgd-manifest.jsonl ../evil \(String(repeating: "a", count: 64)) fifo folder stranger \(keys.joined(separator: " "))
                """, in: scratchB.path)
            try #require(made.status == 0, "\(made.stderr)")
            let run = try await Self.sh("imgctl import --socket \(b.socket) work/hostile.tar", in: scratchB.path)
            #expect(run.status == 1, "\(run.stdout)\(run.stderr)")
            #expect(run.stdout.contains("taken 2 "), "\(run.stdout)")
            for name in ["../evil", "fifo", "folder/", "stranger"] {
                #expect(run.stderr.contains("refused \(name)"), "\(name): \(run.stderr)")
            }
            #expect(run.stderr.contains(String(repeating: "a", count: 64)), "the symlink: \(run.stderr)")
            #expect(!FileManager.default.fileExists(atPath: scratchB.path + "/imgd-data/evil"))
            #expect(try await Self.entries(b) == 2)

            // A header declaring a member of 1 TiB: refused before any of it is read.
            var huge = Array(try Data(contentsOf: URL(fileURLWithPath: tar)))
            huge.removeLast(1024)  // its end-of-archive blocks
            huge += TarHeader.regularFile(name: "imgd-huge", size: 1 << 40, modified: 0) + [UInt8](repeating: 7, count: 4096)
            try Data(huge).write(to: URL(fileURLWithPath: scratchB.path + "/huge.tar"))
            let hugeRun = try await Self.sh("imgctl import --socket \(b.socket) huge.tar", in: scratchB.path)
            #expect(hugeRun.status == 1 && hugeRun.stderr.contains("over the limit"), "\(hugeRun.stdout)\(hugeRun.stderr)")

            let foreign = try await Self.sh("cd work && tar -cf foreign.tar hostile.tar && imgctl import --socket \(b.socket) foreign.tar", in: scratchB.path)
            #expect(foreign.status == 1 && foreign.stderr.contains("not an imgd export"), "\(foreign.stdout)\(foreign.stderr)")
            #expect(try await Self.entries(b) == 2, "nothing cached was lost")
            #expect(await b.stop() == 0, "log:\n\(b.log)")
            #expect(await a.stop() == 0, "log:\n\(a.log)")
        }
    }

    @Test("import into a cache full of pinned entries refuses every entry with a clear reason and keeps the pinned ones; the cap holds")
    func fullCache() async throws {
        try await withRunningServer { server in
            let scratchA = try ScratchFolder(), scratchB = try ScratchFolder()
            defer { scratchA.remove(); scratchB.remove() }
            let (a, tar) = try await Self.exported(server, scratchA, routes: ["/img/carry-big.png?bytes=600000"])
            defer { a.killIfRunning() }
            let b = try await Self.start(scratchB, arguments: ["--disk-limit", "1MiB"])
            defer { b.killIfRunning() }
            let pinned = (0..<2).map { server.url("/img/pinned-\($0).png?bytes=280000") }
            let urls = pinned.map { "\"\($0)\"" }.joined(separator: ",")
            _ = try await b.result(#"{"cmd":"add","urls":[\#(urls)],"pin":"24h"}"#)
            nonisolated(unsafe) var last: [String: Any] = [:]
            let settled = await eventually(timeout: .seconds(60)) {
                last = (try await b.result(#"{"cmd":"status"}"#)["cache"] as? [String: Any]) ?? [:]
                return (last["pinned_bytes"] as? Int ?? 0) > 500_000
            }
            try #require(settled, "the pinned entries: \(last)\n\(b.log)")
            let run = try await Self.sh("imgctl import --socket \(b.socket) \(tar)", in: scratchB.path)
            #expect(run.status == 1 && run.stderr.contains("the cache is full"), "\(run.stdout)\(run.stderr)")
            let status = try await b.result(#"{"cmd":"status"}"#)
            let cache = try #require(status["cache"] as? [String: Any])
            #expect(cache["entries"] as? Int == 2 && (cache["bytes"] as? Int ?? .max) <= 1 << 20, "\(cache)")
            #expect(await b.stop() == 0, "log:\n\(b.log)")
            #expect(await a.stop() == 0, "log:\n\(a.log)")
        }
    }

    @Test(
        "a second uid in the socket's group may export and compare manifests but not import (forbidden); root imports",
        .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to run imgctl as a second uid"))
    func otherUser() async throws {
        try await withRunningServer { server in
            let scratchA = try ScratchFolder()
            defer { scratchA.remove() }
            let (a, tar) = try await Self.exported(server, scratchA, routes: Array(Self.routes.prefix(1)))
            defer { a.killIfRunning() }
            try OtherUser.share(a.socket)
            chmod(tar, 0o644)
            let manifest = try await OtherUser.plain.imgctl(["manifest", "--all"], socket: a.socket)
            #expect(manifest.status == 0 && manifest.stdout.contains("\"sha256\""), "\(manifest.stdout)\(manifest.stderr)")
            let export = try await OtherUser.plain.imgctl(["export", "--all"], socket: a.socket)
            #expect(export.status == 0, "\(export.stderr)")
            let imported = try await OtherUser.plain.imgctl(["import", tar], socket: a.socket)
            #expect(imported.status == 1 && imported.stderr.contains("forbidden"), "\(imported.stdout)\(imported.stderr)")
            #expect(await a.stop() == 0, "log:\n\(a.log)")
        }
    }

    @Test("stream mode: a stream command behind another request on its connection is bad_request and the connection closes; export without list or all is invalid_argument, of an unknown list not_found, each then closed; nothing cached is lost")
    func streamModeRefusals() async throws {
        try await withRunningServer { server in
            let scratch = try ScratchFolder()
            defer { scratch.remove() }
            let (daemon, _) = try await Self.exported(server, scratch, routes: Array(Self.routes.prefix(1)))
            defer { daemon.killIfRunning() }
            let socket = daemon.socket
            let lines = try await onOwnThread { Result { () throws -> [String] in
                var seen: [String] = []
                let behind = try ControlClient(path: socket)
                // `status` runs in a task (not answered at once, as `ping` is): still unanswered when
                // the manifest's line is read behind it.
                try behind.send("{\"id\":1,\"cmd\":\"status\"}\n{\"id\":2,\"cmd\":\"manifest\",\"all\":true}")
                seen.append(try behind.readLine())
                seen.append(try behind.readLine())
                seen.append((try? behind.readLine()) == nil ? "closed" : "open")
                for request in [#"{"id":3,"cmd":"export"}"#, #"{"id":4,"cmd":"export","list":"nope"}"#] {
                    let client = try ControlClient(path: socket)
                    try client.send(request)
                    seen.append(try client.readLine())
                    seen.append((try? client.readLine()) == nil ? "closed" : "open")
                }
                return seen
            } }.get()
            #expect(lines.count == 7)
            #expect(lines[0].contains("\"id\":1,\"ok\":true"), "\(lines)")
            #expect(lines[1].contains("bad_request") && lines[1].contains("connection of its own") && lines[1].contains("\"id\":2"), "\(lines)")
            #expect(lines[2] == "closed" && lines[4] == "closed" && lines[6] == "closed", "\(lines)")
            #expect(lines[3].contains("invalid_argument") && lines[5].contains("not_found"), "\(lines)")
            #expect(try await Self.entries(daemon) == 1)
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }
}
