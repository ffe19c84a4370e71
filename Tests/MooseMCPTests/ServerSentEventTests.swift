// The text/event-stream parser (MooseMCP's ServerSentEventParser) against the WHATWG HTML
// specification's own examples (§9.2.6 "Interpreting an event stream", the examples after it), the
// line-end and decoding rules, the Python MCP SDK's framing (sse-starlette), and its limits. Needs no
// server and no trait: the parser is built without the MCP SDK.
import MooseMCP
import Testing

@Suite struct ServerSentEventTests {
    /// Parses `text` in one piece; the events, and whether the end of the stream discarded anything.
    static func parse(_ text: String, limits: ServerSentEventParser.Limits = .init()) throws -> (
        events: [ServerSentEvent], discarded: Bool
    ) {
        try parse(Array(text.utf8), chunks: [Int.max], limits: limits).0
    }

    /// Parses `bytes` cut into pieces of the given sizes (cycled); the events, what `finish()` said,
    /// and the parser at the end.
    static func parse(_ bytes: [UInt8], chunks: [Int], limits: ServerSentEventParser.Limits = .init()) throws
        -> ((events: [ServerSentEvent], discarded: Bool), ServerSentEventParser)
    {
        var parser = ServerSentEventParser(limits: limits)
        var events: [ServerSentEvent] = []
        var start = 0, index = 0
        while start < bytes.count {
            let size = max(1, chunks[index % chunks.count])
            let end = size >= bytes.count - start ? bytes.count : start + size
            events += try parser.feed(bytes[start..<end])
            start = end
            index += 1
        }
        let discarded = parser.finish()
        return ((events, discarded), parser)
    }

    // MARK: - The specification's examples

    /// "data: YHOO / data: +2 / data: 10": one message whose data is the three lines joined by LF.
    @Test func stockTickerExample() throws {
        let (events, discarded) = try Self.parse("data: YHOO\ndata: +2\ndata: 10\n\n")
        #expect(events == [ServerSentEvent(data: "YHOO\n+2\n10")])
        #expect(!discarded)
    }

    /// The four-block example: a comment fires nothing; "first event" sets the last event ID to 1; an
    /// `id` without a value resets it to empty; a second space after the colon is kept.
    @Test func fourBlocksExample() throws {
        let stream = ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n"
        let (events, _) = try Self.parse(stream)
        #expect(
            events == [
                ServerSentEvent(data: "first event", id: "1"), ServerSentEvent(data: "second event", id: ""),
                ServerSentEvent(data: " third event", id: "")
            ])
    }

    /// "data / (blank) / data / data / (blank) / data:": the first block fires an empty event, the
    /// second one a single line feed, the last is discarded (no blank line after it).
    @Test func emptyDataExample() throws {
        let (events, discarded) = try Self.parse("data\n\ndata\ndata\n\ndata:")
        #expect(events == [ServerSentEvent(data: ""), ServerSentEvent(data: "\n")])
        #expect(discarded, "the last block is not followed by a blank line")
    }

    /// "data:test" and "data: test" fire two identical events: one space after the colon is dropped.
    @Test func spaceAfterTheColonExample() throws {
        let (events, _) = try Self.parse("data:test\n\ndata: test\n\n")
        #expect(events == [ServerSentEvent(data: "test"), ServerSentEvent(data: "test")])
    }

    /// Named events (the specification's `addEventListener('add', …)` example).
    @Test func eventTypes() throws {
        let (events, _) = try Self.parse(
            "event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n")
        #expect(events.map(\.type) == ["add", "remove", "add"] && events.map(\.data) == ["73857293", "2153", "113411"])
        // The type does not outlive its block.
        let (next, _) = try Self.parse("event: add\ndata: 1\n\ndata: 2\n\n")
        #expect(next.map(\.type) == ["add", "message"])
        // A block with a type and no data fires nothing, and its type does not leak into the next.
        let (typed, _) = try Self.parse("event: lonely\n\ndata: x\n\n")
        #expect(typed == [ServerSentEvent(data: "x")])
    }

    // MARK: - Lines, fields, decoding

    /// CRLF, LF and CR all end a line; a CRLF split between two chunks is one line end, not two (which
    /// would dispatch early).
    @Test func lineEnds() throws {
        let expected = [ServerSentEvent(type: "t", data: "a\nb", id: "9")]
        for end in ["\n", "\r\n", "\r"] {
            let stream = ["event: t", "data: a", "data: b", "id: 9", "", ""].joined(separator: end)
            for chunks in [[Int.max], [1], [2], [3], [5, 1, 7]] {
                let ((events, _), _) = try Self.parse(Array(stream.utf8), chunks: chunks)
                #expect(events == expected, "line end \(Array(end.utf8)), chunks \(chunks)")
            }
        }
        var parser = ServerSentEventParser()
        #expect(try parser.feed(Array("data: a\r".utf8)).isEmpty)
        #expect(try parser.feed(Array("\ndata: b\r".utf8)).isEmpty, "the LF after a CR ended no second line")
        #expect(try parser.feed(Array("\n\r\n".utf8)) == [ServerSentEvent(data: "a\nb")])
        // Mixed in one stream.
        let (mixed, _) = try Self.parse("data: 1\r\n\rdata: 2\n\r\ndata: 3\r\r")
        #expect(mixed.map(\.data) == ["1", "2", "3"])
    }

    /// A field without a colon has an empty value; names are case-sensitive; unknown fields and
    /// comments are ignored; only the first colon splits.
    @Test func fields() throws {
        let (events, _) = try Self.parse("Data: no\nDATA: no\nfoo: bar\n: comment\n:\ndata: a:b: c\ndata\n\n")
        #expect(events == [ServerSentEvent(data: "a:b: c\n")])
        let (onlyIgnored, _) = try Self.parse("Data: x\nevent: y\n\n")
        #expect(onlyIgnored.isEmpty, "no data field, no event")
    }

    /// The last event ID persists across events until set again; an `id` containing NUL is ignored;
    /// an over-long one too.
    @Test func lastEventID() throws {
        let ((events, _), parser) = try Self.parse(
            Array("id: 7\ndata: a\n\ndata: b\n\nid: x\u{0}y\ndata: c\n\n".utf8), chunks: [Int.max])
        #expect(events.map(\.id) == ["7", "7", "7"])
        #expect(parser.lastEventID == "7")
        let limits = ServerSentEventParser.Limits(maximumIDLength: 4)
        let ((long, _), _) = try Self.parse(
            Array("id: 1234\ndata: a\n\nid: 12345\ndata: b\n\n".utf8), chunks: [Int.max], limits: limits)
        #expect(long.map(\.id) == ["1234", "1234"])
        // A blank line without data still commits the ID.
        let ((_, _), committed) = try Self.parse(Array("id: 5\n\n".utf8), chunks: [Int.max])
        #expect(committed.lastEventID == "5")
    }

    /// `retry` takes ASCII digits only (anything else is ignored) and is clamped.
    @Test func retry() throws {
        func retry(_ text: String) throws -> Int? { try Self.parse(Array(text.utf8), chunks: [Int.max]).1.retry }
        #expect(try retry("retry: 1500\n") == 1500)
        #expect(try retry("retry: 1500\nretry: 15x\nretry: -1\nretry:\nretry: 1 5\n") == 1500)
        #expect(try retry("retry: 99999999999999999999999999\n") == ServerSentEventParser.Limits().maximumRetry)
        #expect(try retry("retry: ١٢\n") == nil, "non-ASCII digits are not digits here")
    }

    /// A leading UTF-8 byte order mark is dropped (even split across chunks); one later is not a BOM.
    @Test func byteOrderMark() throws {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("data: x\n\n\u{FEFF}data: y\n\n".utf8)
        for chunks in [[Int.max], [1], [2]] {
            let ((events, _), _) = try Self.parse(bytes, chunks: chunks)
            #expect(events == [ServerSentEvent(data: "x")], "chunks \(chunks)")
        }
        // A stream that only starts like a BOM keeps its bytes: here they make the first field's name
        // something else than "data".
        let ((partial, _), _) = try Self.parse([0xEF, 0xBB] + Array("data: z\n\n".utf8), chunks: [1])
        #expect(partial.isEmpty)
        let ((fine, _), _) = try Self.parse([0xEF] + Array("\ndata: z\n\n".utf8), chunks: [1])
        #expect(fine == [ServerSentEvent(data: "z")])
    }

    /// Invalid UTF-8 is replaced by U+FFFD, whatever the chunking (a sequence split between chunks is
    /// decoded whole).
    @Test func decoding() throws {
        let bytes: [UInt8] = Array("data: caf".utf8) + [0xC3, 0xA9, 0x20, 0xFF, 0x0A, 0x0A]
        for chunks in [[Int.max], [1], [10]] {
            let ((events, _), _) = try Self.parse(bytes, chunks: chunks)
            #expect(events == [ServerSentEvent(data: "café \u{FFFD}")], "chunks \(chunks)")
        }
    }

    /// What the Python MCP SDK sends (sse-starlette): CRLF framing, `event: message`, ping comments,
    /// and a priming event with an id and empty data (nothing to dispatch).
    @Test func pythonSDKFraming() throws {
        let message = #"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#
        let stream =
            "id: prime\r\ndata: \r\n\r\n: ping - 2025-06-01 12:00:00.000000+00:00\r\n\r\nevent: message\r\ndata: \(message)\r\n\r\n"
        let ((events, discarded), parser) = try Self.parse(Array(stream.utf8), chunks: [Int.max])
        #expect(events == [ServerSentEvent(data: "", id: "prime"), ServerSentEvent(data: message, id: "prime")])
        #expect(!discarded && parser.lastEventID == "prime")
    }

    // MARK: - Limits and chunking

    /// A line beyond the limit, or an event whose data grows beyond it, ends the stream with an error
    /// that every later call repeats; `finish()` readies the parser for a new stream.
    @Test func limits() throws {
        let limits = ServerSentEventParser.Limits(maximumLineLength: 16, maximumEventSize: 12)
        var parser = ServerSentEventParser(limits: limits)
        #expect(try parser.feed(Array("data: 0123456789\n".utf8)).isEmpty, "a 16-byte line is allowed")
        #expect(throws: ServerSentEventError.lineTooLong(limit: 16)) {
            _ = try parser.feed(Array("data: 01234567890\n".utf8))
        }
        #expect(throws: ServerSentEventError.lineTooLong(limit: 16)) { _ = try parser.feed(Array("\n".utf8)) }
        parser.finish()
        #expect(
            try parser.feed(Array("data: 12345\ndata: 1234\n\n".utf8)) == [ServerSentEvent(data: "12345\n1234")],
            "11 + 1 bytes")
        #expect(throws: ServerSentEventError.eventTooLarge(limit: 12)) {
            _ = try parser.feed(Array("data: 12345\ndata: 123456\n\n".utf8))
        }
        #expect(parser.failure == .eventTooLarge(limit: 12))
        // Comments and unknown fields count against the line limit too (no unbounded buffering).
        var comments = ServerSentEventParser(limits: limits)
        #expect(throws: ServerSentEventError.lineTooLong(limit: 16)) {
            _ = try comments.feed(Array((":" + String(repeating: "x", count: 100)).utf8))
        }
    }

    /// The same events and state whatever the chunking, over a stream mixing everything above
    /// (deterministic pseudo-random cuts).
    @Test func chunkingDoesNotMatter() throws {
        let stream = Array(
            ("\u{FEFF}: hi\r\nevent: a\rdata: 1\r\ndata:  2\n\nid: 3\nretry: 250\ndata\n\r\n"
                + "data: é\u{1F600}\r\r: x\nevent: message\ndata: {\"k\":[1,2]}\r\n\r\ndata: tail").utf8)
        let ((whole, wholeDiscarded), wholeParser) = try Self.parse(stream, chunks: [Int.max])
        #expect(whole.count == 4 && wholeDiscarded && wholeParser.retry == 250 && wholeParser.lastEventID == "3")
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<200 {
            var sizes: [Int] = []
            for _ in 0..<8 {
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                sizes.append(Int(seed >> 60) + 1)
            }
            let ((events, discarded), parser) = try Self.parse(stream, chunks: sizes)
            #expect(
                events == whole && discarded == wholeDiscarded && parser.retry == 250 && parser.lastEventID == "3",
                "chunks \(sizes)")
        }
    }
}

#if MooseMCP
/// MooseMCPTransport's checks on what a server sends back in headers.
@Suite struct MCPTransportHeaderTests {
    @Test func sessionIDsMustBeVisibleASCII() {
        #expect(MooseMCPTransport.isValidSessionID("1868a90c-9f6a-4b0e-8f4b-2c1e0e4c6f1d"))
        #expect(MooseMCPTransport.isValidSessionID("!~"))
        for bad in ["", "a b", "a\tb", "caf\u{E9}", "a\u{7F}", String(repeating: "a", count: 1025)] {
            #expect(!MooseMCPTransport.isValidSessionID(bad), "\(Array(bad.utf8.prefix(8)))")
        }
    }

    @Test func protocolVersionsMustBeShortTokens() {
        #expect(
            MooseMCPTransport.isValidProtocolVersion("2025-11-25")
                && MooseMCPTransport.isValidProtocolVersion("draft_1.2"))
        for bad in ["", "2025 11", "2025-11-25\r\nX: y", "v\u{0}", String(repeating: "1", count: 65)] {
            #expect(!MooseMCPTransport.isValidProtocolVersion(bad))
        }
    }

    @Test func mediaTypesIgnoreCaseParametersAndSpaces() {
        #expect(MooseMCPTransport.mediaType("Text/Event-Stream; charset=utf-8") == Array("text/event-stream".utf8))
        #expect(MooseMCPTransport.mediaType(" application/json ") == Array("application/json".utf8))
        #expect(MooseMCPTransport.mediaType(nil).isEmpty && MooseMCPTransport.mediaType(";x").isEmpty)
    }
}
#endif
