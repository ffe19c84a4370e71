// docs/resource-server.md, "Quick start: Vapor": the code between the markers is quoted there word
// for word (VaporResourceServerDocsExamplesTests checks it), and compiled here with the trait.
#if MooseVapor
import Foundation
import MooseResourceServer
import MooseVapor
import Testing
import Vapor

func serveWithVapor(server: MooseResourceServer.ResourceServer) async throws {
    // docs/resource-server.md vapor begins
    let document = ProtectedResourceDocument(for: server, scopesSupported: ["api.read"])
    let app = try await Application.make(.detect())
    document.addRoute(to: app) // GET /.well-known/oauth-protected-resource, no token
    let protected = app.grouped(
        ResourceServerMiddleware(
            server: server, publicBaseURL: "https://api.example.com",
            requiredScopes: ["api.read"]))
    protected.get("items") { req in "hello \(req.verifiedPrincipal?.subject ?? "")" }
    // Or Vapor's own shape: req.auth.require(AuthenticatedPrincipal.self).verified is the same caller.
    try await app.execute()
    try await app.asyncShutdown()
    // docs/resource-server.md vapor ends
}

/// docs/resource-server.md quotes the example above word for word.
struct VaporResourceServerDocsExamplesTests {
    @Test func theResourceServerPageQuotesTheCompiledVaporExample() throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = here.deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/resource-server.md"), encoding: .utf8)
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let begin = try #require(source.range(of: "    // docs/resource-server.md vapor begins\n"))
        let end = try #require(source.range(of: "    // docs/resource-server.md vapor ends"))
        let example = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : String($0) }.joined(separator: "\n")
        #expect(
            page.contains(
                "```swift\nimport MooseResourceServer\nimport MooseVapor\nimport Vapor\n\n" + example + "```"),
            "docs/resource-server.md's vapor example differs from VaporResourceServerDocsExamples.swift")
    }
}
#endif
