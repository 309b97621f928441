import ImgdFuzz

#if canImport(Glibc)
import Glibc
#endif

// Built two ways. With `-D IMGD_FUZZING -sanitize=fuzzer` (make fuzz) this file is libFuzzer's
// callback and libFuzzer brings `main`; the target is named by IMGD_FUZZ_TARGET. Built plainly,
// it is a replayer: `imgd-fuzz TARGET FILE...` runs each file through the target once and
// prints what each gave, to reproduce a finding without the fuzzer.

/// Writes a line to standard error.
private func printError(_ message: String) {
    var line = message + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// The target this process fuzzes, read once from the environment.
private let selectedTarget: FuzzTarget = {
    let name = getenv("IMGD_FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        printError("imgd-fuzz: set IMGD_FUZZ_TARGET to one of: \(names) (got \"\(name)\")")
        exit(2)
    }
    return target
}()

#if IMGD_FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    do {
        try selectedTarget.run(input)
    } catch {
        // A broken invariant is a finding: crash, so that libFuzzer writes the reproducer.
        fatalError("\(error)")
    }
    return 0
}
#else
@main
enum FuzzReplay {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name), arguments.count > 1 else {
            let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")
            printError("usage: imgd-fuzz \(names) FILE...")
            exit(2)
        }
        var failures = 0
        for path in arguments.dropFirst() {
            guard let bytes = readFile(path) else {
                printError("imgd-fuzz: cannot read \(path)")
                failures += 1
                continue
            }
            do {
                try target.run(bytes)
                print("\(path): ok")
            } catch {
                print("\(path): \(error)")
                failures += 1
            }
        }
        exit(failures == 0 ? 0 : 1)
    }

    private static func readFile(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let got = fread(&chunk, 1, chunk.count, file)
            if got == 0 { break }
            bytes += chunk[..<got]
        }
        return bytes
    }
}
#endif
