import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MooseHTTP
import MooseURLSession

/// MooseHTTP's client against a bare URLSession call to the same local server, and the memory a
/// 100 MiB download costs (streamed to disk) against loading it into memory.
enum HTTPBench {
    struct Echo: Endpoint {
        let baseURL: URL
        var path: String { "/echo" }
    }

    static func startServer(root: URL) throws -> (Process, URL) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-u", root.appendingPathComponent("tools/testserver/http_test_server.py").path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        var text = ""
        while !text.contains("\n") { text += String(decoding: pipe.fileHandleForReading.availableData, as: UTF8.self) }
        let port = text.split(separator: " ").last!.trimmingCharacters(in: .whitespacesAndNewlines)
        return (process, URL(string: "http://127.0.0.1:\(port)")!)
    }

    /// This process's CPU time so far (user + system, every thread), in µs: the client's own work,
    /// the server being another process. Less swayed by other load than wall time.
    static func cpuMicroseconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func micro(_ t: timeval) -> Double { Double(t.tv_sec) * 1e6 + Double(t.tv_usec) }
        return micro(usage.ru_utime) + micro(usage.ru_stime)
    }

    /// A plain loop of one contender, for perf: `moose-bench http-profile moose|bare [N]` (default
    /// 20,000 requests), printing the process's CPU time per request.
    static func profile(bare: URLSession, url: URL, client: APIClient, endpoint: Echo) async throws {
        let arguments = Array(CommandLine.arguments.dropFirst(2))
        let count = arguments.dropFirst().first.flatMap { Int($0) } ?? 20_000
        let cpu = cpuMicroseconds()
        if arguments.first == "bare" {
            for _ in 0..<count { _ = try await bare.data(for: URLRequest(url: url)) }
        } else {
            for _ in 0..<count { _ = try await client.send(endpoint) }
        }
        let perRequest = (cpuMicroseconds() - cpu) / Double(count)
        print("\(arguments.first ?? "moose"): \(String(format: "%.1f", perRequest)) µs CPU per request")
    }

    static func maxRSS() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_maxrss // KiB on Linux
    }

    static func run(root: URL) async throws {
        let (server, base) = try startServer(root: root)
        defer { kill(server.processIdentifier, SIGKILL) }
        // The bare session gets the same configuration URLSessionTransport uses, so the difference is the client.
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = 20
        configuration.timeoutIntervalForResource = 40
        configuration.httpMaximumConnectionsPerHost = 6
        let bare = URLSession(configuration: configuration)
        let client = APIClient(transport: URLSessionTransport())
        let endpoint = Echo(baseURL: base)
        let url = base.appendingPathComponent("echo")
        for _ in 0..<50 { // warm up both connections
            _ = try await bare.data(for: URLRequest(url: url))
            _ = try await client.send(endpoint)
        }
        if CommandLine.arguments.dropFirst().first == "http-profile" {
            try await profile(bare: bare, url: url, client: client, endpoint: endpoint)
            return
        }
        var bareSamples: [Double] = [], mooseSamples: [Double] = []
        var bareCPU = 0.0, mooseCPU = 0.0
        for _ in 0..<20 {
            var cpu = cpuMicroseconds()
            for _ in 0..<25 {
                let t0 = DispatchTime.now().uptimeNanoseconds
                _ = try await bare.data(for: URLRequest(url: url))
                bareSamples.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)
            }
            bareCPU += cpuMicroseconds() - cpu
            cpu = cpuMicroseconds()
            for _ in 0..<25 {
                let t0 = DispatchTime.now().uptimeNanoseconds
                _ = try await client.send(endpoint)
                mooseSamples.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)
            }
            mooseCPU += cpuMicroseconds() - cpu
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        let b = median(bareSamples), m = median(mooseSamples)
        print("\n## HTTP client overhead (GET /echo on 127.0.0.1, µs per request, median of 500)\n")
        print(
            "| bare URLSession | MooseHTTP `APIClient` (build, interceptors, retry policy, validation, log checks) | ratio | target |"
        )
        print("|---|---|---|---|")
        print(
            "| \(String(format: "%.0f", b)) | \(String(format: "%.0f", m)) | \(String(format: "%.2fx", m / b)) | ≤ 1.10x |"
        )
        let bc = bareCPU / Double(bareSamples.count), mc = mooseCPU / Double(mooseSamples.count)
        print(
            "\nThe client's CPU time per request (user + system, all its threads; the server is another process): bare \(String(format: "%.0f", bc)) µs, `APIClient` \(String(format: "%.0f", mc)) µs (\(String(format: "%.2fx", mc / bc)))."
        )

        let size = 100 << 20
        let bytesURL = base.appendingPathComponent("bytes").appending(queryItems: [.init(name: "n", value: "\(size)")])
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-bench-download-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let before = maxRSS()
        let transfer = try URLSessionTransport().download(APIRequest(url: bytesURL, timeout: 120), to: file)
        var last: TransferProgress? = nil
        for await step in transfer.progress { last = step }
        _ = try await transfer.response
        let afterDownload = maxRSS()
        let (data, _) = try await bare.data(for: URLRequest(url: bytesURL))
        let afterInMemory = maxRSS()
        print("\n## 100 MiB download: peak memory growth (max RSS, MiB)\n")
        print("| MooseURLSession `download(to:)` (streamed to disk) | URLSession `data(for:)` (held in memory) |")
        print("|---|---|")
        print(
            "| \((afterDownload - before) / 1024) (file \(last?.completed ?? 0) bytes) | \((afterInMemory - afterDownload) / 1024) (\(data.count) bytes) |"
        )
    }
}
