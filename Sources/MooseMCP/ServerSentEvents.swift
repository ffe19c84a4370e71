// The `text/event-stream` parser (WHATWG HTML, "Server-sent events", §9.2.6 "Interpreting an event
// stream") that MooseMCPTransport reads MCP servers' SSE answers with. Not behind the MooseMCP
// trait: it needs nothing but the standard library, and the fuzz harness (tools/fuzz, `sse`) reaches
// it without building the MCP SDK. Package access only: without the trait the module stays empty.

/// One event dispatched from a `text/event-stream` (WHATWG HTML §9.2.6).
package struct ServerSentEvent: Sendable, Hashable {
    /// The event type: the last `event:` field of the block, `message` when there was none.
    package var type: String
    /// The `data:` fields of the block joined with line feeds (UTF-8 decoded, invalid bytes replaced
    /// by U+FFFD, as the specification's decoder does).
    package var data: String
    /// The stream's last event ID when this event was dispatched (`id:` persists across events until
    /// the server sets it again; empty when it never did, or set it empty).
    package var id: String

    /// An event (tests).
    package init(type: String = "message", data: String, id: String = "") {
        self.type = type
        self.data = data
        self.id = id
    }
}

/// Why a `text/event-stream` was given up: a line or an event beyond the parser's limits.
package enum ServerSentEventError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A line (up to its CR, LF or CRLF) longer than `Limits.maximumLineLength` bytes.
    case lineTooLong(limit: Int)
    /// An event whose `data` grew beyond `Limits.maximumEventSize` bytes.
    case eventTooLarge(limit: Int)

    package var description: String {
        switch self {
        case .lineTooLong(let limit): "a text/event-stream line is longer than \(limit) bytes"
        case .eventTooLarge(let limit): "a text/event-stream event is larger than \(limit) bytes"
        }
    }
}

/// An incremental `text/event-stream` parser: feed it bytes as they arrive, in chunks of any size,
/// and it returns the events each chunk completes — the same events, whatever the chunking.
///
/// It follows the WHATWG algorithm: a leading UTF-8 byte order mark is dropped; lines end in CRLF,
/// LF or CR (a CR at the end of one chunk and an LF at the start of the next are one line end); a line
/// starting with `:` is a comment; `field:value` drops one space after the colon; `data` lines are
/// joined with LF; `event` sets the type; `id` sets the last event ID (ignored when it contains NUL);
/// `retry` (ASCII digits only) sets the reconnection time; other fields are ignored; a blank line
/// dispatches the event (none when no `data` came); an event the stream ends in the middle of is
/// discarded.
///
/// Hostile input is bounded: a line over `maximumLineLength` or an event over `maximumEventSize`
/// ends the stream with `ServerSentEventError` (and every later `feed` throws it again); an `id`
/// longer than `maximumIDLength` is ignored like one with NUL; `retry` is clamped to
/// `maximumRetry` milliseconds. Total over any bytes: it never traps.
package struct ServerSentEventParser: Sendable {
    /// The bounds on what a server may send.
    package struct Limits: Sendable, Hashable {
        /// The longest line, in bytes, without its line end.
        package var maximumLineLength: Int
        /// The largest event, in bytes of `data` (its lines and their joining line feeds).
        package var maximumEventSize: Int
        /// The longest `id` kept, in bytes; longer ones are ignored.
        package var maximumIDLength: Int
        /// The largest `retry`, in milliseconds; larger values are clamped to it.
        package var maximumRetry: Int

        /// Limits: by default an event (an MCP message) up to 16 MiB, as `CurlTransport` bounds a body.
        package init(
            maximumLineLength: Int = 16 << 20, maximumEventSize: Int = 16 << 20, maximumIDLength: Int = 1024,
            maximumRetry: Int = 3_600_000
        ) {
            self.maximumLineLength = max(1, maximumLineLength)
            self.maximumEventSize = max(1, maximumEventSize)
            self.maximumIDLength = max(0, maximumIDLength)
            self.maximumRetry = max(0, maximumRetry)
        }
    }

    /// The limits in force.
    package let limits: Limits
    /// The last event ID the stream set (`Last-Event-ID` for a reconnection; empty: none).
    package private(set) var lastEventID = ""
    /// The reconnection time the stream asked for, in milliseconds (`nil`: it did not).
    package private(set) var retry: Int?
    /// The error that ended the stream, if any.
    package private(set) var failure: ServerSentEventError?

    private var line: [UInt8] = []
    private var data: [UInt8] = []
    private var eventType: [UInt8] = []
    private var idBuffer: [UInt8] = []
    /// The first bytes, kept until it is clear whether they are a byte order mark.
    private var head: [UInt8] = []
    private var headDone = false
    /// The previous byte was a CR: an LF right after it ends nothing more.
    private var afterCR = false

    /// A parser with `limits`.
    package init(limits: Limits = Limits()) { self.limits = limits }

    private static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// Parses `bytes`, the next part of the stream, and returns the events they complete, in order.
    ///
    /// - Throws: `ServerSentEventError` when a line or an event passes the limits (then for every
    ///   later call too: the stream is over).
    package mutating func feed(_ bytes: some Sequence<UInt8>) throws(ServerSentEventError) -> [ServerSentEvent] {
        if let failure { throw failure }
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if !headDone {
                head.append(byte)
                if head.count < Self.byteOrderMark.count, Self.byteOrderMark.starts(with: head) { continue }
                headDone = true
                let pending = head
                head = []
                let rest = pending.elementsEqual(Self.byteOrderMark) ? [] : pending
                for held in rest { try take(held, into: &events) }
                continue
            }
            try take(byte, into: &events)
        }
        return events
    }

    /// The stream ended. Returns `true` when an incomplete event (or line) was discarded, as the
    /// specification requires; the parser is then ready for a new stream's bytes with the same last
    /// event ID and retry.
    @discardableResult
    package mutating func finish() -> Bool {
        let discarded = !line.isEmpty || !data.isEmpty || !eventType.isEmpty || (!headDone && !head.isEmpty)
        line = []
        data = []
        eventType = []
        head = []
        headDone = false
        afterCR = false
        failure = nil
        return discarded
    }

    private mutating func take(_ byte: UInt8, into events: inout [ServerSentEvent]) throws(ServerSentEventError) {
        switch byte {
        case 0x0A where afterCR:
            afterCR = false
        case 0x0A, 0x0D:
            afterCR = byte == 0x0D
            try endLine(into: &events)
        default:
            afterCR = false
            guard line.count < limits.maximumLineLength else {
                return try fail(.lineTooLong(limit: limits.maximumLineLength))
            }
            line.append(byte)
        }
    }

    private mutating func fail(_ error: ServerSentEventError) throws(ServerSentEventError) {
        failure = error
        line = []
        data = []
        eventType = []
        throw error
    }

    private mutating func endLine(into events: inout [ServerSentEvent]) throws(ServerSentEventError) {
        defer { line.removeAll(keepingCapacity: true) }
        guard let first = line.first else { return dispatch(into: &events) }
        if first == 0x3A { return } // ":" — a comment
        let name: ArraySlice<UInt8>, value: ArraySlice<UInt8>
        if let colon = line.firstIndex(of: 0x3A) {
            name = line[..<colon]
            let start = colon + 1 < line.endIndex && line[colon + 1] == 0x20 ? colon + 2 : colon + 1
            value = line[start...]
        } else {
            name = line[...]
            value = []
        }
        if name.elementsEqual("data".utf8) {
            guard data.count + value.count + 1 <= limits.maximumEventSize else {
                return try fail(.eventTooLarge(limit: limits.maximumEventSize))
            }
            data.append(contentsOf: value)
            data.append(0x0A)
        } else if name.elementsEqual("event".utf8) {
            eventType = Array(value)
        } else if name.elementsEqual("id".utf8) {
            if !value.contains(0), value.count <= limits.maximumIDLength { idBuffer = Array(value) }
        } else if name.elementsEqual("retry".utf8) {
            guard !value.isEmpty, value.allSatisfy({ (0x30...0x39).contains($0) }) else { return }
            var milliseconds = 0
            for digit in value {
                milliseconds = min(limits.maximumRetry, milliseconds * 10 + Int(digit - 0x30))
            }
            retry = milliseconds
        }
    }

    private mutating func dispatch(into events: inout [ServerSentEvent]) {
        lastEventID = String(decoding: idBuffer, as: UTF8.self)
        defer {
            data.removeAll(keepingCapacity: true)
            eventType = []
        }
        guard !data.isEmpty else { return }
        let type = eventType.isEmpty ? "message" : String(decoding: eventType, as: UTF8.self)
        events.append(
            ServerSentEvent(type: type, data: String(decoding: data.dropLast(), as: UTF8.self), id: lastEventID))
    }
}
