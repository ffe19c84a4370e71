import Foundation
@testable import MooseOAuthSystem
import Synchronization
import Testing

/// `LoopbackUserAgent` and the `open` it is given.
struct LoopbackUserAgentTests {
    /// An `open` that returns only once its browser has the page (a scripted browser run to the end,
    /// a sheet that waits) and pays no heed to cancellation does not hold the login back: the redirect
    /// is returned as soon as it arrives, so the page that browser gets is the login's outcome.
    /// (The agent used to await `open` in its task group: the login then went on only after the
    /// browser had its page — `outcomeWait`'s "received", 20 s later, or the browser giving up: 15 s
    /// per login at Glewlwyd — and "signed in" never reached the tab.)
    @Test func anOpenThatWaitsForItsPageDoesNotHoldTheLogin() async throws {
        let page = Mutex<String?>(nil)
        let agent = try LoopbackUserAgent(timeout: 60) { url in
            let redirect = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?
                .first { $0.name == "redirect_uri" }?.value.flatMap(URL.init(string:))
            let port = UInt16(redirect?.port ?? 0)
            // The browser follows the redirect and waits for its page, on a thread of its own.
            let answer: String = await withCheckedContinuation { continuation in
                Thread {
                    continuation.resume(
                        returning: (try? RawClient.getBlocking(port, "/callback?code=c4&state=s4")) ?? "")
                }.start()
            }
            page.withLock { $0 = answer }
        }
        var authorization = URLComponents(string: "https://id.example.com/authorize")!
        authorization.queryItems = [
            URLQueryItem(name: "state", value: "s4"),
            URLQueryItem(name: "redirect_uri", value: agent.redirectURI.absoluteString)
        ]
        let callback = try await agent.authorize(
            url: try #require(authorization.url), redirectURI: agent.redirectURI, expectedState: "s4")
        #expect(callback.absoluteString.contains("code=c4"))
        #expect(page.withLock { $0 } == nil, "the browser already had a page before the login's outcome")
        await agent.loginFinished(nil)
        for _ in 0..<200 where page.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(50)) }
        let answer = try #require(page.withLock { $0 })
        #expect(answer.hasPrefix("HTTP/1.1 200") && answer.contains("Signed in"), "\(answer.prefix(400))")
    }

    /// An `open` that fails before any redirect arrived fails the login with its own error, at once.
    @Test func anOpenThatFailsFailsTheLogin() async throws {
        struct NoBrowser: Error {}
        let agent = try LoopbackUserAgent(timeout: 60) { _ in throw NoBrowser() }
        await #expect(throws: NoBrowser.self) {
            _ = try await agent.authorize(
                url: URL(string: "https://id.example.com/authorize?state=s5")!, redirectURI: agent.redirectURI,
                expectedState: "s5")
        }
    }
}
