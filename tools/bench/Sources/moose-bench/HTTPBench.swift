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
        var bareSamples: [Double] = [], mooseSamples: [Double] = []
        for _ in 0..<20 {
            for _ in 0..<25 {
                let t0 = DispatchTime.now().uptimeNanoseconds
                _ = try await bare.data(for: URLRequest(url: url))
                bareSamples.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)
            }
            for _ in 0..<25 {
                let t0 = DispatchTime.now().uptimeNanoseconds
                _ = try await client.send(endpoint)
                mooseSamples.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)
            }
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
