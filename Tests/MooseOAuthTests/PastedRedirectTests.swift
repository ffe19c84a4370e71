import Foundation
import MooseOAuth
import MooseOAuthSystem
import Synchronization
import Testing

/// The library's `PasteUserAgent` (what `moose login --paste` runs): each pasted line checked before
/// use (`PastedRedirect`, also fuzzed), bounded tries, a bare Enter asked again; the CLI's own
/// pseudo-terminal runs are `PasteLoginTests`.
@Suite struct PastedRedirectTests {
    @Test func pastedLinesAreCheckedBeforeUse() throws {
        let redirect = try #require(URL(string: "http://127.0.0.1:4711/callback"))
        func parse(_ line: String) -> Result<URL, PastedRedirect.Refusal> {
            PastedRedirect.parse(line, redirectURI: redirect, expectedState: "s1")
        }
        #expect(
            try parse("  http://127.0.0.1:4711/callback?code=abc&state=s1 ").get().absoluteString
                == "http://127.0.0.1:4711/callback?code=abc&state=s1")
        #expect(
            try parse("http://127.0.0.1:4711/callback?error=access_denied&state=s1").get().query
                == "error=access_denied&state=s1")
        // A bare code: this login's redirect and state.
        #expect(try parse("a/b+c").get().absoluteString == "http://127.0.0.1:4711/callback?code=a/b+c&state=s1")
        for refused in [
            "", "http://127.0.0.1:4712/callback?code=abc&state=s1", "http://localhost:4711/callback?code=abc&state=s1",
            "https://127.0.0.1:4711/callback?code=abc&state=s1", "http://127.0.0.1:4711/other?code=abc&state=s1",
            "http://127.0.0.1:4711/callback?code=abc&state=s2", "http://127.0.0.1:4711/callback?code=abc",
            "http://127.0.0.1:4711/callback?state=s1", "code with spaces", "c\u{1B}[2Jode", "cödé",
            String(repeating: "a", count: 9000)
        ] {
            if case .success(let url) = parse(refused) { Issue.record("accepted \(refused.prefix(60)) as \(url)") }
        }
        // A provider that promises iss (RFC 9207): only the whole address, with its iss.
        func whole(_ line: String) -> Result<URL, PastedRedirect.Refusal> {
            PastedRedirect.parse(line, redirectURI: redirect, expectedState: "s1", requiresAddress: true)
        }
        #expect(throws: PastedRedirect.Refusal.self) { try whole("abc").get() }
        #expect(throws: PastedRedirect.Refusal.self) {
            try whole("http://127.0.0.1:4711/callback?code=abc&state=s1").get()
        }
        #expect(
            try whole("http://127.0.0.1:4711/callback?code=abc&state=s1&iss=https%3A%2F%2Fid").get().query
                == "code=abc&state=s1&iss=https%3A%2F%2Fid")
        #expect(
            try whole("http://127.0.0.1:4711/callback?error=access_denied&state=s1").get().query
                == "error=access_denied&state=s1")
    }

    /// Lines typed one by one to the agent, with a loopback listener nobody comes back to.
    @Test func theAgentTakesTheFirstGoodLineAndStopsAfterFiveRefusals() async throws {
        let told = Mutex<[String]>([])
        func agent(_ lines: [String]) throws -> PasteUserAgent {
            let queue = Mutex(lines[...])
            return PasteUserAgent(
                loopback: try LoopbackUserAgent(open: { _ in }),
                readLine: { queue.withLock { $0.popFirst() } }, tell: { line in told.withLock { $0.append(line) } })
        }
        let first = try agent(["", "http://127.0.0.1:1/elsewhere?code=x&state=s1", "the-code"])
        let url = try await first.authorize(
            url: try #require(URL(string: "https://id.example.com/authorize?state=s1")),
            redirectURI: first.loopback.redirectURI, expectedState: "s1")
        #expect(url.query == "code=the-code&state=s1")
        #expect(told.withLock { $0.first?.hasPrefix("nothing was pasted") == true && $0.count == 2 })
        #expect(told.withLock { $0.last?.contains("(4 tries left)") == true })

        let wrong = try agent(Array(repeating: "http://127.0.0.1:1/x?code=c&state=s1", count: 6))
        await #expect {
            _ = try await wrong.authorize(
                url: try #require(URL(string: "https://id.example.com/authorize?state=s1")),
                redirectURI: wrong.loopback.redirectURI, expectedState: "s1")
        } throws: { error in
            (error as? OAuthError)?.code == OAuthError.pasteRefused
                && (error as? OAuthError)?.message.contains("5 pasted lines were refused") == true
        }
    }
}
