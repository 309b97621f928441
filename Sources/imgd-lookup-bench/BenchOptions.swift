/// The command line of `imgd-lookup-bench`.
struct BenchOptions {
    /// How URLs are picked from the file.
    enum Order: String {
        /// Each client walks the list from its own starting point (client i starts at i × count / clients).
        case roundRobin = "round-robin"
        /// Each client draws uniformly with its own seeded generator (xorshift), the same draws every run.
        case random
    }

    /// How long the measured part lasts.
    enum Length {
        /// Everything answered in this many seconds.
        case seconds(Double)
        /// This many requests in all, split evenly over the clients; the time is until the last client finishes.
        case requests(Int)
    }

    var socket = ""
    var urlFile = ""
    /// Connections. 1 by default.
    var clients = 1
    /// Threads driving the connections, each with an epoll loop over its share of them. 1 by
    /// default, like redis-benchmark, so the client's own context switches do not take the
    /// machine from the server.
    var threads = 1
    /// Requests in flight per connection: 1 (send, wait for the reply, send the next) by default;
    /// at most 64, the daemon's limit of requests waiting per connection.
    var depth = 1
    /// 5 seconds by default.
    var length = Length.seconds(5)
    /// Untimed requests before the measured part, so connections, caches and the daemon's
    /// threads are warm: 1 second by default.
    var warmUp = 1.0
    var order = Order.random
    /// The daemon's pid, to report the CPU time it used during the measured part.
    var serverPID: Int32?
    /// Metrics scrapes a second beside the lookups (`--scrape-rate`); 0: none.
    var scrapeRate = 0.0
    /// Where they go: `--scrape-url`, else the control socket (`--scrape-socket`, else `--socket`).
    var scrapeURL: String?
    var scrapeSocket: String?
    /// The run fails (exit 4) when a lookup took longer (`--max-latency-ms`).
    var maxLatencyMilliseconds: Double?

    static let usage = """
        usage: imgd-lookup-bench --socket PATH --urls FILE [--clients N] [--pipeline P]
                                 [--seconds S | --requests N] [--warmup S] [--order random|round-robin]
                                 [--threads T] [--server-pid PID]
                                 [--scrape-rate N [--scrape-url http://IP:PORT/metrics | --scrape-socket PATH]]
                                 [--max-latency-ms MS]
        Sends `get` requests with "fetch": false for the URLs in FILE (one a line, all cached) to a
        running imgd, from N connections (driven by T threads, 1 by default, each an epoll loop)
        keeping P requests in flight each, and
        prints one JSON line: requests/s and latency percentiles. With --scrape-rate, a thread of
        its own scrapes the daemon's metrics N times a second meanwhile (the control socket's
        metrics command, or GET on --scrape-url over HTTP/1.1 keep-alive) and the line adds the
        scrapes' count, errors and latencies. Exit status 1 when any reply was not a hit (the run
        is not valid) or a scrape failed, 2 on bad usage, 3 when the socket cannot be reached, 4
        when a lookup took longer than --max-latency-ms.
        """

    init(_ arguments: [String]) throws(LookupBenchError) {
        var iterator = arguments.makeIterator()
        func value(_ name: String) throws(LookupBenchError) -> String {
            guard let value = iterator.next() else { throw .usage("\(name) needs a value\n\(Self.usage)") }
            return value
        }
        func number<T: LosslessStringConvertible & Comparable>(_ name: String, atLeast least: T) throws(LookupBenchError) -> T {
            let text = try value(name)
            guard let number = T(text), number >= least else { throw .usage("\(name) wants a number ≥ \(least), not \(text)") }
            return number
        }
        while let argument = iterator.next() {
            switch argument {
            case "--socket": socket = try value(argument)
            case "--urls": urlFile = try value(argument)
            case "--clients": clients = try number(argument, atLeast: 1)
            case "--threads": threads = try number(argument, atLeast: 1)
            case "--pipeline": depth = try number(argument, atLeast: 1)
            case "--seconds": length = .seconds(try number(argument, atLeast: 0.1))
            case "--requests": length = .requests(try number(argument, atLeast: 1))
            case "--warmup": warmUp = try number(argument, atLeast: 0)
            case "--order":
                let text = try value(argument)
                guard let order = Order(rawValue: text) else { throw .usage("--order wants random or round-robin, not \(text)") }
                self.order = order
            case "--server-pid": serverPID = try number(argument, atLeast: 1)
            case "--scrape-rate": scrapeRate = try number(argument, atLeast: 0.1)
            case "--scrape-url": scrapeURL = try value(argument)
            case "--scrape-socket": scrapeSocket = try value(argument)
            case "--max-latency-ms": maxLatencyMilliseconds = try number(argument, atLeast: 0.001)
            case "-h", "--help": throw .usage(Self.usage)
            default: throw .usage("unknown argument \(argument)\n\(Self.usage)")
            }
        }
        guard !socket.isEmpty, !urlFile.isEmpty else { throw .usage("--socket and --urls are required\n\(Self.usage)") }
        if scrapeURL != nil, scrapeSocket != nil { throw .usage("--scrape-url and --scrape-socket: pick one") }
        if scrapeRate == 0, scrapeURL != nil || scrapeSocket != nil { throw .usage("--scrape-url and --scrape-socket need --scrape-rate") }
        guard depth <= 64 else { throw .usage("--pipeline is at most 64: imgd answers too_many_requests past 64 waiting requests") }
        if case .requests(let count) = length, count < clients {
            throw .usage("--requests must be at least --clients (\(clients))")
        }
    }
}
