import Foundation
@testable import MooseOAuth
import MooseOAuthSystem
import MooseHTTP
import MooseURLSession
import Testing

/// Issue "Without a person", §2–3: the parts of a workload login that need no provider — what a
/// source must yield, what each source says when its platform gives nothing, and the checks on an
/// exchange's answer (RFC 8693 §2.2.1). The exchanges themselves run against authgent-server in
/// WorkloadLoginCLITests.
struct WorkloadIdentityTests {
    static let jwt = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"

    @Test func aSourceMustYieldACompactJWT() async throws {
        let padded = WorkloadIdentity(name: "test") { _ in "  \(Self.jwt)\n" }
        #expect(try await padded.token(audience: nil) == Self.jwt)
        for bad in ["", "not a jwt", "a.b", "a.b.c.d", "a.b!.c", String(repeating: "a", count: 70_000) + ".b.c", "a..c"]
        {
            let source = WorkloadIdentity(name: "the test source") { _ in bad }
            do {
                _ = try await source.token(audience: nil)
                Issue.record("accepted \(bad.prefix(40))")
            } catch let error as OAuthError {
                #expect(error.code == OAuthError.workloadIdentity && error.message.contains("the test source"))
            }
        }
    }

    /// A command's output is the token, run without a shell; a command of no words (an app's input) is
    /// a configuration error at each read, never a crash on its missing first word.
    @Test func aCommandsOutputIsTheTokenAndNoCommandIsAnError() async throws {
        #expect(try await WorkloadIdentity.command(["printf", "%s\n", Self.jwt]).token(audience: nil) == Self.jwt)
        await expectWorkloadError(
            WorkloadIdentity.command(["false"]), contains: "the command false exited with status 1")
        for words in [[], [""], ["", "x"]] {
            do {
                _ = try await WorkloadIdentity.command(words).token(audience: nil)
                Issue.record("\(words) gave a token")
            } catch let error as OAuthError {
                #expect(error.code == OAuthError.invalidConfiguration && error.message.contains("program"), "\(error)")
            }
        }
    }

    @Test func eachSourceSaysWhatItsPlatformDidNotGive() async throws {
        await expectWorkloadError(WorkloadIdentity.file("/no/such/token"), contains: "/no/such/token")
        await expectWorkloadError(
            WorkloadIdentity.environmentVariable("MOOSE_ID_TOKEN", environment: [:]), contains: "id_tokens")
        let transport = URLSessionTransport()
        await expectWorkloadError(
            WorkloadIdentity.githubActions(environment: [:], transport: transport), contains: "id-token: write")
        // The request token never goes to a plain-http address off this machine.
        await expectWorkloadError(
            WorkloadIdentity.githubActions(
                environment: [
                    "ACTIONS_ID_TOKEN_REQUEST_URL": "http://ci.example.com/token",
                    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "secret"
                ], transport: transport),
            contains: "not an https URL")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("moose-workload-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data((Self.jwt + "\n").utf8).write(to: file)
        let source = WorkloadIdentity.file(file.path)
        #expect(try await source.token(audience: "ignored") == Self.jwt)
        try Data("rotated.eyJzdWIiOiJ5In0.c2ln".utf8).write(to: file) // read again on every call
        #expect(try await source.token(audience: nil) == "rotated.eyJzdWIiOiJ5In0.c2ln")
    }

    func expectWorkloadError(
        _ source: WorkloadIdentity, contains text: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            _ = try await source.token(audience: "aud")
            Issue.record("\(source.name) gave a token", sourceLocation: sourceLocation)
        } catch let error as OAuthError {
            #expect(
                error.code == OAuthError.workloadIdentity && error.message.contains(text), "\(error)",
                sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func anExchangesAnswerMustBeWhatWasAskedFor() throws {
        var tokens = TokenSet(accessToken: "t", tokenType: "Bearer", requestedAt: Date())
        try TokenExchangeFlow.check(tokens, requested: nil) // no issued_token_type, Bearer: an access token (liberal)
        tokens.issuedTokenType = ExchangeToken.accessTokenType
        try TokenExchangeFlow.check(tokens, requested: ExchangeToken.accessTokenType)
        #expect(throws: OAuthError.self) { try TokenExchangeFlow.check(tokens, requested: ExchangeToken.idTokenType) }
        tokens.issuedTokenType = ExchangeToken.idTokenType
        #expect(throws: OAuthError.self, "an ID token is not an access token to send") {
            try TokenExchangeFlow.check(tokens, requested: nil)
        }
        tokens.issuedTokenType = nil
        tokens.tokenType = "N_A"
        #expect(throws: OAuthError.self) { try TokenExchangeFlow.check(tokens, requested: nil) }
        #expect(
            ExchangeToken.type(named: "id_token") == ExchangeToken.idTokenType
                && ExchangeToken.type(named: "bogus") == nil)
        #expect(throws: OAuthError.self) {
            _ = try ExchangeToken("two words", type: ExchangeToken.jwtType).checked(as: "subject")
        }
    }
}
