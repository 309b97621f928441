#if canImport(Glibc)
import Glibc
#endif

/// `imgd-lookup-bench`: lookups over a running imgd's control socket. N connections, driven by
/// one epoll thread (or `--threads T`), send `{"id":…,"cmd":"get","fetch":false,"url":…}` for URLs that are cached,
/// one at a time or P in flight, for a fixed time (or number of requests) after a warm-up; every
/// reply must be a hit from memory or disk. Prints one JSON line:
///
/// ```
/// {"clients":16,"pipeline":1,"requests":123456,"seconds":5.000,"requests_per_s":24691.2,
///  "p50_ms":0.612,"p99_ms":1.404,"p999_ms":2.310,"max_ms":7.118,"memory_hits":…,"disk_hits":…,
///  "errors":0,"valid":true,"client_cpu_s":2.1,"server_cpu_s":5.8}
/// ```
///
/// Requests and latencies count the replies that arrived while measuring; a request's latency
/// runs from the `send` that carried it to the `recv` that returned its reply. Hits are
/// counted over the whole run (warm-up and drain included). Run by `bench/lookup-bench.sh`,
/// side by side with redis-benchmark.
@main
struct LookupBench {
    static func main() {
        do {
            let options = try BenchOptions(Array(CommandLine.arguments.dropFirst()))
            exit(try run(options))
        } catch {
            let line = Array("imgd-lookup-bench: \(error)\n".utf8)
            _ = write(STDERR_FILENO, line, line.count)
            exit(error.exitStatus)
        }
    }

    /// Runs the benchmark, prints its line, and returns the exit status: 0, 1 when a reply was
    /// not a hit or a scrape failed, 4 when a lookup took longer than `--max-latency-ms`.
    static func run(_ options: BenchOptions) throws(LookupBenchError) -> Int32 {
        let table = try RequestTable(urlsIn: options.urlFile)
        let control = RunControl()
        var quotas = [Int?](repeating: nil, count: options.clients)
        if case .requests(let total) = options.length {
            quotas = (0..<options.clients).map { total / options.clients + ($0 < total % options.clients ? 1 : 0) }
        }
        // Connect every client before any starts, so a refused connection stops the run at once.
        var clients: [LookupClient] = []
        for index in 0..<options.clients {
            clients.append(try LookupClient(
                path: options.socket, index: index, clients: options.clients, table: table, control: control,
                depth: options.depth, quota: quotas[index], order: options.order))
        }
        let threads = min(options.threads, options.clients)
        let loops = (0..<threads).map { thread in
            ClientLoop(clients: clients.indices.filter { $0 % threads == thread }.map { clients[$0] })
        }
        for loop in loops { loop.start() }
        var scraper: Scraper?
        if options.scrapeRate > 0 {
            let target = try options.scrapeURL.map { url throws(LookupBenchError) in try Scraper.Target(url: url) }
                ?? .control(options.scrapeSocket ?? options.socket)
            scraper = Scraper(target: target, rate: options.scrapeRate, control: control)
        }

        sleep(seconds: options.warmUp)
        let clientCPUBefore = ProcessCPU.ownSeconds()
        let serverCPUBefore = options.serverPID.flatMap(ProcessCPU.seconds(ofProcess:))
        let start = monotonicNanoseconds()
        control.enter(.measuring)
        // Scrapes only while measuring: every lookup timed has the scrapes beside it.
        scraper?.start()

        var end: UInt64
        var clientCPUAfter: Double
        var serverCPUAfter: Double?
        switch options.length {
        case .seconds(let seconds):
            sleep(seconds: seconds)
            end = monotonicNanoseconds()
            control.enter(.stopping)
            clientCPUAfter = ProcessCPU.ownSeconds()
            serverCPUAfter = options.serverPID.flatMap(ProcessCPU.seconds(ofProcess:))
            for loop in loops { loop.join() }
            scraper?.join()
        case .requests:
            for loop in loops { loop.join() }
            control.enter(.stopping)
            scraper?.join()
            // Until the last client counted its share (the drain of replies still owed is not timed).
            end = clients.map(\.tally.finishedAt).max() ?? start
            clientCPUAfter = ProcessCPU.ownSeconds()
            serverCPUAfter = options.serverPID.flatMap(ProcessCPU.seconds(ofProcess:))
        }

        var total = LookupClient.Tally()
        for client in clients {
            let tally = client.tally
            total.latencies.add(tally.latencies)
            total.measured += tally.measured
            total.memoryHits += tally.memoryHits
            total.diskHits += tally.diskHits
            total.errors += tally.errors
            total.firstError = total.firstError ?? tally.firstError
        }
        let seconds = Double(end &- start) / 1e9
        let valid = total.errors == 0 && total.measured > 0
        func milliseconds(_ fraction: Double) -> String { decimal(Double(total.latencies.percentile(fraction)) / 1e6, 3) }
        var fields: [(String, String)] = [
            ("clients", "\(options.clients)"), ("pipeline", "\(options.depth)"), ("requests", "\(total.measured)"),
            ("seconds", decimal(seconds, 3)), ("requests_per_s", decimal(seconds > 0 ? Double(total.measured) / seconds : 0, 1)),
            ("p50_ms", milliseconds(0.5)), ("p99_ms", milliseconds(0.99)), ("p999_ms", milliseconds(0.999)),
            ("max_ms", decimal(Double(total.latencies.maximum) / 1e6, 3)),
            ("memory_hits", "\(total.memoryHits)"), ("disk_hits", "\(total.diskHits)"), ("errors", "\(total.errors)"),
            ("valid", valid ? "true" : "false"), ("client_cpu_s", decimal(clientCPUAfter - clientCPUBefore, 3)),
        ]
        if let before = serverCPUBefore, let after = serverCPUAfter {
            fields.append(("server_cpu_s", decimal(after - before, 3)))
        }
        var scrapesFailed = false
        if let scraper {
            let scrapes = scraper.tally
            scrapesFailed = scrapes.errors > 0
            func scrapeMilliseconds(_ fraction: Double) -> String { decimal(Double(scrapes.latencies.percentile(fraction)) / 1e6, 3) }
            fields += [
                ("scrapes", "\(scrapes.scrapes)"), ("scrapes_per_s", decimal(seconds > 0 ? Double(scrapes.scrapes) / seconds : 0, 1)),
                ("scrape_errors", "\(scrapes.errors)"), ("scrape_bytes", "\(scrapes.lastBytes)"),
                ("scrape_p50_ms", scrapeMilliseconds(0.5)), ("scrape_p99_ms", scrapeMilliseconds(0.99)),
                ("scrape_max_ms", decimal(Double(scrapes.latencies.maximum) / 1e6, 3)),
            ]
            if let firstError = scrapes.firstError { fields.append(("scrape_first_error", jsonString(firstError))) }
        }
        var tooSlow = false
        if let limit = options.maxLatencyMilliseconds {
            tooSlow = Double(total.latencies.maximum) / 1e6 > limit
            fields.append(("max_latency_ms_limit", decimal(limit, 3)))
            fields.append(("within_limit", tooSlow ? "false" : "true"))
        }
        if let firstError = total.firstError {
            fields.append(("first_error", jsonString(firstError)))
        }
        print("{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
        if !valid || scrapesFailed { return 1 }
        return tooSlow ? 4 : 0
    }

    /// `value` with `places` decimals (no Foundation here for `String(format:)`).
    static func decimal(_ value: Double, _ places: Int) -> String {
        var scale = 1
        for _ in 0..<places { scale *= 10 }
        let scaled = Int((value * Double(scale)).rounded())
        let fraction = String(abs(scaled) % scale)
        let whole = "\(scaled < 0 ? "-" : "")\(abs(scaled) / scale)"
        return places == 0 ? whole : whole + "." + String(repeating: "0", count: places - fraction.count) + fraction
    }

    /// `text` as a JSON string literal.
    static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case _ where scalar.value < 0x20: out += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
