import Foundation
@testable import MooseOAuth
@testable import MooseOAuthSystem
import MooseHTTP
import HTTPTypes
import MooseJWT
import MooseTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Raw TCP to the loopback listener: what any local process can do while a login waits.
enum RawClient {
    /// Connects to 127.0.0.1:`port`; returns the socket.
    static func connect(_ port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else { close(fd); throw POSIXError(.ECONNREFUSED) }
        return fd
    }

    /// Sends `GET target` and returns the whole answer (blocking work on a thread of its own, never
    /// on the cooperative pool).
    static func get(_ port: UInt16, _ target: String) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue(label: "raw-client").async {
                continuation.resume(with: Result { try getBlocking(port, target) })
            }
        }
    }

    static func getBlocking(_ port: UInt16, _ target: String) throws -> String {
        let fd = try connect(port)
        defer { close(fd) }
        let request = Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            answer += buffer[0..<count]
        }
        return String(decoding: answer, as: UTF8.self)
    }
}

struct LoopbackHostileClientTests {
    /// A redirect with a wrong or missing state (or a stray `error=access_denied`) from another local
    /// process gets an error page and is ignored; the real redirect still completes the login.
    @Test func forgedRedirectsAreIgnoredAndTheRealOneStillArrives() async throws {
        let agent = try LoopbackUserAgent(timeout: 20) { _ in }
        let port = agent.receiver.port
        let state = "the-real-state"
        async let callback = agent.authorize(
            url: URL(string: "https://id.example.com/authorize?state=x")!,
            redirectURI: agent.redirectURI, expectedState: state)
        try await Task.sleep(nanoseconds: 100_000_000)
        for forged in [
            "/callback?code=stolen&state=wrong", "/callback?code=stolen", "/callback?error=access_denied",
            "/callback?error=access_denied&state=the-real-state%C3%A9", "/callback?state=THE-REAL-STATE&code=x"
        ] {
            let answer = try await RawClient.get(port, forged)
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(forged): \(answer.prefix(40))")
            #expect(answer.contains("This response was ignored"))
        }
        #expect(try await RawClient.get(port, "/favicon.ico").hasPrefix("HTTP/1.1 404"))
        let real = try await RawClient.get(port, "/callback?code=good&state=the-real-state")
        #expect(real.hasPrefix("HTTP/1.1 200") && real.contains("Response received"))
        let url = try await callback
        #expect(url.absoluteString.contains("code=good"))
    }

    /// One connection trickling a byte every few seconds, and ten idle ones, cannot hold the real
    /// redirect back: connections are served concurrently, each within its own deadline (10 s).
    /// Served one after another, the eleven opened first would hold the real redirect for 110 s:
    /// past the login's 90 s deadline, so the login fails — no stopwatch in the test.
    @Test func slowAndIdleConnectionsDoNotDelayTheRealRedirect() async throws {
        let agent = try LoopbackUserAgent(timeout: 90) { _ in }
        let port = agent.receiver.port
        async let callback = agent.authorize(
            url: URL(string: "https://id.example.com/authorize")!,
            redirectURI: agent.redirectURI, expectedState: "s1")
        try await Task.sleep(nanoseconds: 100_000_000)
        let idle = try (0..<10).map { _ in try RawClient.connect(port) }
        let slow = try RawClient.connect(port)
        defer { for fd in idle + [slow] { close(fd) } }
        let trickle = Task.detached {
            for byte in Array("GET /callback?state=s1&code=slow HTTP/1.1\r\n".utf8).prefix(4) {
                var b = byte
                _ = send(slow, &b, 1, Int32(MSG_NOSIGNAL))
                try? await Task.sleep(nanoseconds: 1_000_000_000)
            }
        }
        defer { trickle.cancel() }
        let real = try await RawClient.get(port, "/callback?code=good&state=s1")
        #expect(real.hasPrefix("HTTP/1.1 200"))
        let url = try await callback
        #expect(url.absoluteString.contains("code=good"))
    }

    /// A redirect port another program holds is said as such, with the way out — not a bare
    /// "cannot listen".
    @Test func aPortInUseIsSaidWithTheWayOut() throws {
        let holder = try LoopbackReceiver()
        defer { holder.close() }
        do {
            _ = try LoopbackReceiver(port: holder.port)
            Issue.record("a second listener on \(holder.port) was accepted")
        } catch let error as OAuthError {
            #expect(
                error.code == OAuthError.invalidConfiguration
                    && error.message.contains("another program is listening there: stop it, or choose another port"),
                "\(error.message)")
        }
    }

    /// The login's own deadline holds even while a slow client trickles a byte every 0.5 s for 20 s
    /// (a per-`recv` timeout never fires then: the old receiver waited for it indefinitely).
    @Test func theDeadlineHoldsWhileASlowClientIsConnected() async throws {
        let receiver = try LoopbackReceiver()
        let slow = try RawClient.connect(receiver.port)
        let stop = LockedBox(false)
        DispatchQueue(label: "slowloris").async {
            for _ in 0..<40 where !stop.value {
                var b = UInt8(ascii: "G")
                _ = send(slow, &b, 1, Int32(MSG_NOSIGNAL))
                usleep(500_000)
            }
            close(slow)
        }
        defer { stop.value = true }
        // The receiver's own loop, timed on a thread of its own: what is measured is the deadline,
        // not how long a loaded machine's cooperative pool takes to resume an awaiting test.
        let outcome = LockedBox<(elapsed: TimeInterval, error: (any Error)?)?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue(label: "wait").async {
            let started = Date()
            do {
                _ = try receiver.acceptLoop(
                    until: started.addingTimeInterval(1.5), expectedState: "s", cancelled: LockedFlag())
                outcome.value = (Date().timeIntervalSince(started), nil)
            } catch {
                outcome.value = (Date().timeIntervalSince(started), error)
            }
            done.signal()
        }
        await withCheckedContinuation { (resume: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                done.wait(); resume.resume()
            }
        }
        let result = try #require(outcome.value)
        #expect((result.error as? OAuthError)?.code == OAuthError.timedOut, "\(String(describing: result.error))")
        // Issue "Nothing a person set up is lost" §8: a login that never got its redirect may have been refused
        // in the browser for an unregistered redirect URI — said, and a person must act (not "retry later").
        let timedOut = try #require(result.error as? OAuthError)
        #expect(timedOut.errorClass == .needsLogin)
        #expect(
            timedOut.message.contains("may not accept the redirect URI \(receiver.redirectURI.absoluteString)"),
            "\(timedOut.message)")
        // The slow client lasts 20 s; the deadline is 1.5 s (a few seconds of slack for a loaded machine).
        #expect(result.elapsed < 12, "the wait took \(result.elapsed) s")
    }

    /// The provider's words on the page are text, never markup.
    @Test func theProvidersErrorIsEscapedOnThePage() async throws {
        let agent = try LoopbackUserAgent(timeout: 20) { _ in }
        let port = agent.receiver.port
        async let callback = agent.authorize(
            url: URL(string: "https://id.example.com/authorize")!,
            redirectURI: agent.redirectURI, expectedState: "s2")
        try await Task.sleep(nanoseconds: 100_000_000)
        let page = try await RawClient.get(
            port, "/callback?state=s2&error=access_denied&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E%1B%5B2J"
        )
        #expect(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(!page.contains("<script>") && !page.contains("\u{1B}"))
        #expect(page.contains("<title>Moose — sign-in did not complete</title>"))
        _ = try await callback
    }

    @Test func requestLineParsingIsStrict() {
        #expect(
            LoopbackReceiver.requestTarget(fromHead: Array("GET /callback?a=b HTTP/1.1\r\n\r\n".utf8))
                == "/callback?a=b")
        #expect(LoopbackReceiver.requestTarget(fromHead: Array("POST /callback HTTP/1.1\r\n".utf8)) == nil)
        #expect(LoopbackReceiver.requestTarget(fromHead: Array("GET http://evil/ HTTP/1.1\r\n".utf8)) == nil)
        #expect(LoopbackReceiver.requestTarget(fromHead: Array("GET /a\u{1B}b HTTP/1.1\r\n".utf8)) == nil)
        #expect(LoopbackReceiver.requestTarget(fromHead: []) == nil)
    }
}

struct AuthorizationResponseIssuerTests {
    func flow(issParameterSupported: Bool?) throws -> AuthorizationCodeFlow {
        var metadata = ProviderMetadata(
            issuer: "https://id.example.com", authorizationEndpoint: URL(string: "https://id.example.com/authorize"),
            tokenEndpoint: URL(string: "https://id.example.com/token"))
        metadata.authorizationResponseIssParameterSupported = issParameterSupported
        let client = OAuthClient(metadata: metadata, clientID: "c", authentication: .none, transport: CurlTransport())
        return AuthorizationCodeFlow(
            client: client, redirectURI: URL(string: "http://127.0.0.1:1/callback")!,
            userAgent: try LoopbackUserAgent { _ in }, idTokens: nil)
    }

    /// RFC 9207: a wrong `iss` (even one canonically equivalent), or none where promised, stops the
    /// flow before the code is redeemed.
    @Test func aWrongOrMissingIssIsRefusedBeforeTheCodeIsUsed() async throws {
        for (supported, query) in [
            (true, "iss=https%3A%2F%2Fevil.example"), (nil, "iss=https%3A%2F%2Fevil.example"),
            (true, ""), (false, "iss=https%3A%2F%2Fid.example.com%2F")
        ] {
            let flow = try flow(issParameterSupported: supported)
            let request = try flow.makeRequest(AuthorizationParameters(scopes: ["profile"]))
            let callback = URL(string: "http://127.0.0.1:1/callback?code=c&state=\(request.state)&\(query)")!
            do {
                _ = try await flow.complete(request, callback: callback)
                Issue.record("accepted \(query)")
            } catch let error as OAuthError {
                #expect(error.code == OAuthError.issuerMismatchInResponse, "\(query): \(error)")
            }
        }
    }
}

struct DiscoveryValidationTests {
    func document(_ members: [String: Any]) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: members))
    }

    var complete: [String: Any] {
        [
            "issuer": "https://id.example.com", "authorization_endpoint": "https://id.example.com/authorize",
            "token_endpoint": "https://id.example.com/token", "jwks_uri": "https://id.example.com/jwks",
            "response_types_supported": ["code"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"]
        ]
    }

    @Test func requiredMembersAreReportedByName() throws {
        _ = try Discovery.parseDocument(document(complete), issuer: "https://id.example.com", kind: .openIDConnect)
        var partial = complete
        for name in ["jwks_uri", "subject_types_supported", "id_token_signing_alg_values_supported"] {
            partial[name] = nil
        }
        do {
            _ = try Discovery.parseDocument(document(partial), issuer: "https://id.example.com", kind: .openIDConnect)
            Issue.record("an incomplete OIDC document was accepted")
        } catch let error as OAuthError {
            #expect(
                error.message.contains("lacks jwks_uri, subject_types_supported, id_token_signing_alg_values_supported")
            )
        }
        // RFC 8414 needs less: no jwks_uri, no subject types.
        var rfc8414 = complete
        rfc8414["subject_types_supported"] = nil
        rfc8414["jwks_uri"] = nil
        _ = try Discovery.parseDocument(document(rfc8414), issuer: "https://id.example.com", kind: .authorizationServer)
        rfc8414["response_types_supported"] = nil
        #expect(throws: OAuthError.self) {
            _ = try Discovery.parseDocument(
                document(rfc8414), issuer: "https://id.example.com", kind: .authorizationServer)
        }
    }

    @Test func theIssuerIsComparedByteForByte() throws {
        var nfd = complete
        nfd["issuer"] = "https://id.example.com/cafe\u{301}"
        do {
            _ = try Discovery.parseDocument(
                document(nfd), issuer: "https://id.example.com/caf\u{E9}", kind: .openIDConnect)
            Issue.record("an NFD issuer matched the NFC one")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.issuerMismatch)
        }
    }

    @Test func plainHTTPIsRefusedExceptToLoopback() throws {
        var mixed = complete
        mixed["token_endpoint"] = "http://id.example.com/token"
        let metadata = try Discovery.parseDocument(
            document(mixed), issuer: "https://id.example.com", kind: .openIDConnect)
        #expect(throws: OAuthError.self) { try metadata.checkTransportSecurity() }
        #expect(TransportSecurity.permits(URL(string: "http://127.0.0.1:8765/token")!))
        #expect(TransportSecurity.permits(URL(string: "http://[::1]:8765/token")!))
        #expect(TransportSecurity.permits(URL(string: "http://localhost/token")!))
        #expect(!TransportSecurity.permits(URL(string: "http://127.0.0.1.evil.example/token")!))
        #expect(!TransportSecurity.permits(URL(string: "http://id.example.com/token")!))
        #expect(!TransportSecurity.permits(URL(string: "ftp://id.example.com/token")!))
    }

    @Test func plainHTTPIssuersAreRefusedBeforeAnyRequest() async throws {
        do {
            _ = try await Discovery.fetch(issuer: "http://id.example.com", transport: CurlTransport())
            Issue.record("a plain-http issuer was accepted")
        } catch let error as OAuthError {
            #expect(error.code == OAuthError.insecureEndpoint)
        }
    }
}

struct ResponseBoundsTests {
    func parse(_ body: String, status: Int = 200) throws -> TokenSet {
        try TokenResponse.parse(
            APIResponse(status: HTTPResponse.Status(code: status), body: Data(body.utf8)),
            requestedAt: Date(timeIntervalSince1970: 1_000),
            requestedScopes: [])
    }

    @Test func hugeExpiresInIsClampedAndEverythingStaysTotal() throws {
        for value in ["1e300", "\"1e400\"", "1e400", "-1e300", "\"nan\"", "18446744073709551616"] {
            let tokens = try parse(#"{"access_token":"abc","token_type":"Bearer","expires_in":\#(value)}"#)
            let expiry = try #require(tokens.expiresAt).timeIntervalSince1970
            #expect(expiry.isFinite && expiry >= 1_000 && expiry <= 1_000 + TokenSet.maximumLifetime, "\(value)")
            _ = tokens.description
            _ = try JSONEncoder().encode(tokens)
        }
    }

    @Test func tokensAndTypesThatCouldEscapeAreRefusedOrFlagged() throws {
        #expect(throws: OAuthError.self) { _ = try parse(#"{"access_token":"a\u001bb","token_type":"Bearer"}"#) }
        #expect(throws: OAuthError.self) {
            _ = try parse(#"{"access_token":"abc","token_type":"Bearer'; touch /tmp/p; echo '"}"#)
        }
        #expect(throws: OAuthError.self) {
            _ = try parse(#"{"access_token":"abc","refresh_token":"r\nX-Evil: 1","token_type":"Bearer"}"#)
        }
        // VSCHAR but not b64token: accepted from the server, refused wherever it would become a header.
        let shell = try parse(#"{"access_token":"x'; touch /tmp/p; echo '","token_type":"Bearer"}"#)
        #expect(!TokenCharacters.isB64Token(shell.accessToken))
        let token = AccessToken(value: shell.accessToken)
        #expect(throws: OAuthError.self) { _ = try token.checkedAuthorizationHeader() }
        #expect(try AccessToken(value: "mF_9.B5f-4.1JqM").checkedAuthorizationHeader() == "Bearer mF_9.B5f-4.1JqM")
    }

    @Test func errorBodiesNeverQuoteSecrets() throws {
        do {
            _ = try parse(
                #"{"access_token":"SECRET-AT-1234567890","refresh_token":"SECRET-RT-1234567890","message":"nope"}"#,
                status: 400)
            Issue.record("a 400 parsed")
        } catch let error as OAuthError {
            #expect(!error.description.contains("SECRET"), "\(error)")
            #expect(error.description.contains("access_token") && error.description.contains("values not shown"))
        }
        let text = Redaction.body(
            Array("invalid token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijklmnop here".utf8))
        #expect(!text.contains("eyJhbGci"), "\(text)")
    }

    @Test func userInfoSubjectIsComparedByteForByte() throws {
        let body = Array(#"{"sub":"cafe\u0301"}"#.utf8)
        #expect(throws: OAuthError.self) { _ = try OAuthClient.parseUserInfo(body, expectedSubject: "caf\u{E9}") }
        #expect(try OAuthClient.parseUserInfo(body, expectedSubject: "cafe\u{301}")["sub"] != nil)
    }

    /// RFC 8628's interval and expires_in are bounded before use (1e300 trapped `moose login --device`).
    @Test func deviceIntervalsAreBounded() async throws {
        let transport = ScriptedTransport { _ in
            APIResponse(
                status: 200,
                body: Data(
                    #"{"device_code":"d","user_code":"U","verification_uri":"https://id.example.com/device","interval":1e300,"expires_in":1e300}"#
                        .utf8))
        }
        let metadata = ProviderMetadata(
            issuer: "https://id.example.com", tokenEndpoint: URL(string: "https://id.example.com/token"),
            deviceAuthorizationEndpoint: URL(string: "https://id.example.com/device"))
        let client = OAuthClient(metadata: metadata, clientID: "c", authentication: .none, transport: transport)
        let device = try await DeviceAuthorizationFlow(client: client, idTokens: nil) { _ in }.start(
            AuthorizationParameters())
        #expect(device.interval == DeviceAuthorization.maximumInterval)
        #expect(device.expiresAt.timeIntervalSinceNow <= DeviceAuthorization.maximumLifetime + 1)
    }
}

/// A value shared with a background thread.
final class LockedBox<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.lock(); defer { lock.unlock() }; return stored }
        set { lock.lock(); stored = newValue; lock.unlock() }
    }
}
