import MooseHTTP
import MooseOAuth
import MooseTesting
import Synchronization
import Testing

/// The one issuer rule (`IssuerRule`), which discovery, plan resolution and `moose --issuer` all ask.
@Suite struct IssuerRuleTests {
    @Test(arguments: [
        "https://id.example.com", "https://id.example.com/realms/a", "https://id.example.com:8443/",
        "http://127.0.0.1:8080", "http://localhost/x", "http://[::1]:9000"
    ])
    func aUsableIssuerPasses(_ issuer: String) throws {
        #expect(IssuerRule.problem(issuer) == nil)
        #expect(try IssuerRule.check(issuer).absoluteString == issuer)
    }

    @Test(arguments: [
        ("id.example.com", "is not an absolute https URL"),
        ("ftp://id.example.com", "is not an absolute https URL"),
        ("https://", "is not a usable issuer URL (the URL has no host"),
        ("https://exa mple.com", "is not a usable issuer URL"),
        ("https://id.example.com:99999", "is not a usable issuer URL"),
        ("https://id.example.com/x?y=1", "is not a usable issuer URL (it has a query or fragment)"),
        ("https://id.example.com/#f", "is not a usable issuer URL (it has a query or fragment)"),
        ("https://user@id.example.com", "is not a usable issuer URL"),
        ("https://id.example.com/\u{1B}[31m", "is not a usable issuer URL")
    ])
    func anUnusableIssuerIsAConfigurationError(_ issuer: String, _ predicate: String) throws {
        let problem = try #require(IssuerRule.problem(issuer))
        #expect(problem.code == OAuthError.invalidConfiguration)
        #expect(problem.predicate.hasPrefix(predicate), "\(problem.predicate)")
        let error = try #require(throws: OAuthError.self) { try IssuerRule.check(issuer) }
        #expect(error.code == OAuthError.invalidConfiguration && error.message.contains(predicate))
    }

    @Test(arguments: ["http://id.example.com", "http://10.0.0.1:8080/realm", "HTTP://id.example.com"])
    func plainHTTPToAnotherMachineIsInsecure(_ issuer: String) throws {
        let problem = try #require(IssuerRule.problem(issuer))
        #expect(problem.code == OAuthError.insecureEndpoint)
        #expect(problem.predicate.hasPrefix("is plain http to another machine"))
    }

    /// Discovery asks the same rule before it sends anything (no transport is reached).
    @Test func discoveryRefusesWhatTheRuleRefuses() async throws {
        let sent = Mutex(0)
        let transport = ScriptedTransport { _ in
            sent.withLock { $0 += 1 }
            return .json("{}")
        }
        for (issuer, code) in [
            ("https://id.example.com/x?y=1", OAuthError.invalidConfiguration),
            ("http://id.example.com", OAuthError.insecureEndpoint)
        ] {
            let error = await #expect(throws: OAuthError.self) {
                try await Discovery.fetch(issuer: issuer, transport: transport)
            }
            #expect(error?.code == code, "\(issuer)")
        }
        #expect(sent.withLock { $0 } == 0)
    }
}
