// docs/library.md, "A service or a workload" and "Sessions shared with `moose`": the code between
// the markers is quoted there word for word (LibraryDocsExamplesTests checks it), and compiled here.
import Foundation
import MooseHTTP
import MooseOAuth
import Testing

func serviceAndWorkloadLogins(storage: any SessionStorage, transport: any HTTPTransport) async throws {
    // docs/library.md service begins
    // A pod whose kubelet projects an identity token into a file: no secret on disk (or github, gitlab,
    // env:VAR, command:PROGRAM ARG…).
    var pod = SessionPlan(
        name: "deployer", issuer: "https://id.example.com", clientID: "deployer", scopes: [],
        grant: .workload(SessionPlan.Workload(source: "file:/var/run/secrets/tokens/moose")))
    pod.audience = "https://api.example.com"
    let workload = try TokenManager(plan: pod, storage: storage, transport: transport)
    try await workload.login(with: .workload)
    let token = try await workload.accessToken() // renewed with a fresh identity token when due

    // A service with its secret in a file (or .secretVariable(VAR, sending:), or .privateKey(file:keyID:)).
    let billing = SessionPlan(
        name: "billing", issuer: "https://id.example.com", clientID: "billing", scopes: ["invoices"],
        grant: .clientCredentials, credential: .secretFile("/run/secrets/billing", sending: .basic))
    let service = try TokenManager(plan: billing, storage: storage, transport: transport)
    try await service.login(with: .clientCredentials)
    // docs/library.md service ends
    _ = token
}

func openAnySession(storage: any SessionStorage, transport: any HTTPTransport) async throws {
    // docs/library.md open begins
    // Whatever made the session (moose login --workload …, another app, a replica): renew it as it says.
    let moose = try await TokenManager.open(key: "deployer", storage: storage, transport: transport)
    let token = try await moose.accessToken()
    // docs/library.md open ends
    _ = token
}

/// docs/library.md quotes the examples above word for word.
struct LibraryDocsExamplesTests {
    @Test func theLibraryPageQuotesTheCompiledExamples() throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = here.deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/library.md"), encoding: .utf8)
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        for name in ["service", "open"] {
            let begin = try #require(source.range(of: "    // docs/library.md \(name) begins\n"))
            let end = try #require(source.range(of: "    // docs/library.md \(name) ends"))
            let example = source[begin.upperBound..<end.lowerBound].split(
                separator: "\n", omittingEmptySubsequences: false
            )
            .map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : String($0) }.joined(separator: "\n")
            #expect(
                page.contains("```swift\n" + example + "```"),
                "docs/library.md's \(name) example differs from LibraryDocsExamples.swift")
        }
    }
}

/// Issue "The second hour" §5: every `OAuthError` code is in docs/library.md's table with its class.
struct ErrorClassDocsTests {
    @Test func everyCodeIsDocumentedWithItsClass() throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let page = try String(
            contentsOf: here.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
                "docs/library.md"),
            encoding: .utf8)
        for code in OAuthError.allCodes {
            #expect(
                page.contains("| `\(code)` | `.\(OAuthError.errorClass(of: code).rawValue)` |"),
                "\(code) is not in the errors table")
        }
        #expect(OAuthError.errorClass(of: OAuthError.invalidGrant) == .needsLogin)
        #expect(OAuthError.errorClass(of: OAuthError.transient) == .retryable)
        #expect(OAuthError.errorClass(of: OAuthError.invalidClient) == .misconfigured)
        #expect(OAuthError.errorClass(of: OAuthError.stateMismatch) == .protocolViolation)
    }
}
