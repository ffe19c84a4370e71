#if MooseMCP
import Foundation
import MCP
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A small HTTP/1.1 server on 127.0.0.1 (swift-nio, which the MCP SDK already brings) handing every
/// request, as the SDK's framework-neutral `HTTPRequest`, to `handler` — the part of an MCP server that
/// an app writes with its own HTTP framework. Repeated header fields are joined with commas.
final class MCPTestHTTPHost: Sendable {
    typealias Handler = @Sendable (MCP.HTTPRequest) async -> MCP.HTTPResponse

    /// The port it listens on.
    let port: Int
    private let task: Task<Void, Never>
    private let serverChannel: any Channel
    private let streams: StreamGauge

    private init(port: Int, task: Task<Void, Never>, serverChannel: any Channel, streams: StreamGauge) {
        self.port = port
        self.task = task
        self.serverChannel = serverChannel
        self.streams = streams
    }

    /// How many streamed answers (server-sent events) the host is writing now: a connection task waiting
    /// for the next event of a stream counts until that stream ends, whether its client is there or not.
    var openStreams: Int { streams.count.withLock { $0 } }

    /// The number of streamed answers being written.
    final class StreamGauge: Sendable {
        let count = Mutex(0)
    }

    /// Listens on an ephemeral port of 127.0.0.1.
    static func start(handler: @escaping Handler) async throws -> MCPTestHTTPHost {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.configureHTTPServerPipeline()
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(
                        wrappingChannelSynchronously: child)
                }
            }
        let port = server.channel.localAddress?.port ?? 0
        let channel = server.channel
        let streams = StreamGauge()
        let task = Task<Void, Never> {
            _ = try? await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { connections in
                    for try await connection in connections {
                        group.addTask { await serve(connection, streams, handler) }
                    }
                }
                group.cancelAll()
            }
        }
        return MCPTestHTTPHost(port: port, task: task, serverChannel: channel, streams: streams)
    }

    /// Stops listening and closes every connection.
    func stop() async {
        try? await serverChannel.close()
        task.cancel()
        await task.value
    }

    private static func serve(
        _ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, _ streams: StreamGauge,
        _ handler: Handler
    ) async {
        let channel = connection.channel
        await withTaskCancellationHandler {
            try? await connection.executeThenClose { inbound, outbound in
                var head: HTTPRequestHead?
                var body = ByteBuffer()
                for try await part in inbound {
                    switch part {
                    case .head(let received):
                        head = received
                        body.clear()
                    case .body(var chunk):
                        body.writeBuffer(&chunk)
                    case .end:
                        guard let received = head else { continue }
                        var headers: [String: String] = [:]
                        for (name, value) in received.headers {
                            headers[name] = headers[name].map { $0 + ", " + value } ?? value
                        }
                        let request = MCP.HTTPRequest(
                            method: received.method.rawValue, headers: headers,
                            body: body.readableBytes > 0 ? Data(body.readableBytesView) : nil, path: received.uri)
                        try await write(await handler(request), to: outbound, streams)
                    }
                }
            }
        } onCancel: {
            channel.close(promise: nil)
        }
    }

    private static func write(
        _ response: MCP.HTTPResponse, to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>,
        _ streams: StreamGauge
    ) async throws {
        var headers = HTTPHeaders()
        for (name, value) in response.headers.sorted(by: { $0.key < $1.key }) { headers.add(name: name, value: value) }
        let status = HTTPResponseStatus(statusCode: response.statusCode)
        if case .stream(let stream, _) = response {
            streams.count.withLock { $0 += 1 }
            defer { streams.count.withLock { $0 -= 1 } }
            try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers)))
            for try await chunk in stream { try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: chunk)))) }
            try await outbound.write(.end(nil))
            return
        }
        let data = response.bodyData ?? Data()
        headers.replaceOrAdd(name: "Content-Length", value: String(data.count))
        try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers)))
        if !data.isEmpty { try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: data)))) }
        try await outbound.write(.end(nil))
    }
}
#endif
