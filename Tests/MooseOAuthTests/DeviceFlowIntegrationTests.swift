import Foundation
import MooseHTTP
import MooseOAuth
import MooseTestSupport
import MooseURLSession
import Synchronization
import Testing

/// The device authorization grant against the real provider: the "user" approves in the headless
/// browser (sign in, type the user code at /device/, accept) while the flow polls.
struct DeviceFlowIntegrationTests {
    static func flow(present: @escaping @Sendable (DeviceAuthorization) async -> Void) async throws
        -> DeviceAuthorizationFlow
    {
        let metadata = try await TestIdP.discovery.metadata(
            for: TestIdP.issuer,
            overrides: EndpointOverrides(
                deviceAuthorizationEndpoint: URL(string: TestIdP.issuer + "/device-authorization/")))
        let client = OAuthClient(metadata: metadata, clientID: "moose-device", transport: TestIdP.transport)
        return DeviceAuthorizationFlow(
            client: client, idTokens: try LoginIntegrationTests.validator(metadata, clientID: "moose-device"),
            present: present)
    }

    /// The user, on another device: sign in, enter the code, accept.
    static func approve(_ device: DeviceAuthorization, in browser: HeadlessBrowser) async throws {
        let (page, _) = try await browser.page(device.verificationURI)
        let answer = try await browser.submitForm(at: page, values: ["user_code": device.userCode])
        if let location = answer.headerFields[.location],
            let confirm = URL(string: location, relativeTo: page)?.absoluteURL
        {
            _ = try await browser.visit(confirm, stopAt: "http://never/")
        }
    }

    @Test func userApprovesAndTheFlowGetsTokens() async throws {
        let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: TestIdP.transport)
        let shown = Mutex<DeviceAuthorization?>(nil)
        let flow = try await Self.flow { device in
            shown.withLock { $0 = device }
            Task { try await Self.approve(device, in: browser) }
        }
        let tokens = try await flow.authorize(AuthorizationParameters(scopes: ["openid"]))
        #expect(!tokens.accessToken.isEmpty)
        let device = try #require(shown.withLock { $0 })
        #expect(device.verificationURI.absoluteString == TestIdP.issuer + "/device/" && device.userCode.count >= 6)
    }

    /// Issue "The first hour", §4: a device login whose answer has no ID token is named from UserInfo,
    /// and a refresh that brings an ID token keeps the name (names in it would replace it). (The provider sends an ID token
    /// here; the test drops it from the answer, as a provider that sends none would.)
    @Test func withoutAnIDTokenTheUserIsNamedFromUserInfoAndARefreshKeepsTheName() async throws {
        let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: TestIdP.transport)
        let flow = try await Self.flow { device in
            Task { try await Self.approve(device, in: browser) }
        }
        var tokens = try await flow.authorize(AuthorizationParameters(scopes: ["openid", "profile", "email"]))
        tokens.idToken = nil
        let storage = InMemorySessionStorage()
        let engine = SessionEngine(key: "tv", storage: storage) // in memory: the provider is the real part here
        let session = try await engine.completeLogin(tokens, client: flow.client)
        #expect(SessionSummary(key: "tv", session: session).displayName == "alice", "\(session.attributes)")

        // A refresh brings an ID token (this provider's carries only sub): the names stay, the ID token is kept.
        let client = flow.client
        let validator = try LoginIntegrationTests.validator(client.metadata, clientID: "moose-device")
        let coordinator = engine.coordinator(client: { _ in (client, validator) })
        let fresh = try await coordinator.refreshNow()
        #expect(!fresh.value.isEmpty)
        let stored = try #require(try await storage.load("tv")).session
        #expect(
            stored.tokens.idToken != nil && SessionSummary(key: "tv", session: stored).displayName == "alice",
            "\(stored.attributes)")
    }

    @Test func deniedRequestEndsWithAccessDenied() async throws {
        let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: TestIdP.transport)
        let flow = try await Self.flow { device in
            Task {
                let (page, _) = try await browser.page(device.verificationURI)
                let answer = try await browser.submitForm(at: page, values: ["user_code": device.userCode])
                if let location = answer.headerFields[.location],
                    let confirm = URL(string: location, relativeTo: page)?.absoluteURL
                {
                    _ = try await browser.submitForm(at: confirm, values: ["action": "deny"])
                }
            }
        }
        do {
            _ = try await flow.authorize(AuthorizationParameters(scopes: ["openid"]))
            Issue.record("a denied device request produced tokens")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.accessDenied, "\(error)")
        }
    }
}

/// Polling rules with an in-memory token endpoint (slow_down, expiry) — timing is the point here.
struct DevicePollingTests {
    final class Script: HTTPTransport, @unchecked Sendable {
        let answers = Mutex<[String]>([])
        init(_ answers: [String]) { self.answers.withLock { $0 = answers } }
        func send(_ request: APIRequest) async throws -> APIResponse {
            let next = answers.withLock { $0.isEmpty ? "pending" : $0.removeFirst() }
            switch next {
            case "ok": return APIResponse(status: 200, body: Data(#"{"access_token":"a","token_type":"Bearer"}"#.utf8))
            case "slow": return APIResponse(status: 400, body: Data(#"{"error":"slow_down"}"#.utf8))
            case "expired": return APIResponse(status: 400, body: Data(#"{"error":"expired_token"}"#.utf8))
            default: return APIResponse(status: 400, body: Data(#"{"error":"authorization_pending"}"#.utf8))
            }
        }
    }

    @Test func slowDownAddsFiveSecondsAndPendingKeepsPolling() async throws {
        let metadata = ProviderMetadata(
            issuer: "https://id.example.com", tokenEndpoint: URL(string: "https://id.example.com/token")!)
        let script = Script(["pending", "slow", "pending", "ok"])
        var flow = DeviceAuthorizationFlow(
            client: OAuthClient(metadata: metadata, clientID: "c", transport: script),
            idTokens: nil
        ) { _ in }
        let waits = Mutex<[TimeInterval]>([])
        flow.sleep = { seconds in waits.withLock { $0.append(seconds) } }
        let device = DeviceAuthorization(
            deviceCode: "d", userCode: "U", verificationURI: URL(string: "https://x")!,
            verificationURIComplete: nil, expiresAt: Date().addingTimeInterval(600), interval: 2)
        let tokens = try await flow.poll(device, scopes: [])
        #expect(tokens.accessToken == "a")
        #expect(waits.withLock { $0 } == [2, 2, 7, 7])
        let expiring = Script(["pending", "expired"])
        var second = DeviceAuthorizationFlow(
            client: OAuthClient(metadata: metadata, clientID: "c", transport: expiring), idTokens: nil
        ) { _ in }
        second.sleep = { _ in }
        await #expect(throws: OAuthError.self) { _ = try await second.poll(device, scopes: []) }
    }

    /// Issue "The first hour", §4: an `interval` longer than the code's remaining life wakes at
    /// expiry and says the code expired (it slept a whole interval past a dead code before).
    @Test func anIntervalLongerThanTheCodesLifeWakesAtExpiry() async throws {
        let flow = try await DeviceFlowIntegrationTests.flow { _ in }
        let real = try await flow.start(AuthorizationParameters(scopes: ["openid"]))
        let device = DeviceAuthorization(
            deviceCode: real.deviceCode, userCode: real.userCode, verificationURI: real.verificationURI,
            verificationURIComplete: nil, expiresAt: Date().addingTimeInterval(2), interval: 60)
        let clock = ContinuousClock()
        let begun = clock.now
        do {
            _ = try await flow.poll(device, scopes: ["openid"])
            Issue.record("an unapproved code produced tokens")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.expiredToken, "\(error)")
        }
        #expect(clock.now - begun < .seconds(30), "the flow slept past the code's expiry: \(clock.now - begun)")
    }
}
