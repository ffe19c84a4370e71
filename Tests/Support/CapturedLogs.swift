public import Logging
import Synchronization

/// A swift-log `Logger` that keeps every record, rendered as "message key=value …" (metadata sorted):
/// the tests of the resource-server middlewares read what an operator's log would show, and check that
/// no token, proof or query reached it.
public final class CapturedLogs: Sendable {
    private let records = Mutex<[(level: Logger.Level, text: String)]>([])

    public init() {}

    /// Every record so far, in order.
    public var all: [(level: Logger.Level, text: String)] { records.withLock { $0 } }

    /// A logger whose records land here (every level).
    public var logger: Logger { Logger(label: "test") { _ in Handler(sink: self) } }

    struct Handler: LogHandler {
        let sink: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = metadata.merging(event.metadata ?? [:]) { $1 }.sorted { $0.key < $1.key }
            let text = "\(event.message) " + fields.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            sink.records.withLock { $0.append((event.level, text)) }
        }
    }
}
