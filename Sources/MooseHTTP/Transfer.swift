#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A transport that streams bodies to and from files: a download never holds the body in memory,
/// an upload reads the file as it sends. `URLSessionTransport` and `HTTPClientTransport` are such
/// transports (`CurlTransport` is not: it keeps bodies in memory, for the CLI's small requests).
///
/// ```swift
/// let transfer = try transport.download(APIRequest(url: bigFileURL), to: destination)
/// for await step in transfer.progress { print(step.completed) }
/// let response = try await transfer.response     // the body is in `destination`
/// ```
public protocol FileTransferTransport: HTTPTransport {
    /// Downloads the response body to `destination` (mode 0600), streamed to disk, with progress.
    /// Cancel the transfer (or its task) to stop it; `response` then throws `CancellationError`.
    func download(_ request: APIRequest, to destination: URL) throws(HTTPRequestError) -> Transfer
    /// Sends `file` as the request body, streamed from disk, with progress.
    func upload(_ request: APIRequest, fromFile file: URL) throws(HTTPRequestError) -> Transfer
}

/// How far a transfer has got.
public struct TransferProgress: Sendable, Hashable {
    /// Bytes transferred so far.
    public let completed: Int64
    /// The expected total, when the server said.
    public let total: Int64?
    /// `completed / total`, when the total is known.
    public var fractionCompleted: Double? { total.map { $0 > 0 ? Double(completed) / Double($0) : 1 } }

    /// A progress report (transports make these).
    public init(completed: Int64, total: Int64?) {
        self.completed = completed
        self.total = total
    }
}

/// A running download or upload: its progress and, eventually, its response.
public struct Transfer: Sendable {
    /// Progress updates; finishes when the transfer does.
    public let progress: AsyncStream<TransferProgress>
    let task: Task<APIResponse, any Error>

    /// A transfer whose `task` produces the response and reports to `progress` (transports make these).
    public init(progress: AsyncStream<TransferProgress>, task: Task<APIResponse, any Error>) {
        self.progress = progress
        self.task = task
    }

    /// The response (for a download, with an empty body: the bytes are in the file).
    public var response: APIResponse {
        get async throws { try await task.value }
    }

    /// Stops the transfer; `response` then throws `CancellationError`.
    public func cancel() { task.cancel() }
}
