// docs/resource-server.md, "Quick start: Hummingbird": the code between the markers is quoted there word
// for word (HummingbirdResourceServerDocsExamplesTests checks it), and compiled here with the trait.
#if MooseHummingbird
import Foundation
import Hummingbird
import MooseHummingbird
import MooseResourceServer
import Testing

func serveWithHummingbird(server: ResourceServer) async throws {
    // docs/resource-server.md hummingbird begins
    struct APIContext: ResourceServerRequestContext {
        var coreContext: CoreRequestContextStorage
        var principal: VerifiedPrincipal? // set by the middleware before the route runs
        init(source: Source) { coreContext = .init(source: source) }
    }

    let document = ProtectedResourceDocument(
        resource: "https://api.example.com", authorizationServers: ["https://id.example.com"],
        scopesSupported: ["api.read"])
    let router = Router(context: APIContext.self)
    document.addRoute(to: router) // GET /.well-known/oauth-protected-resource, no token
    router.group("items")
        .add(
            middleware: ResourceServerMiddleware(
                server: server, publicBaseURL: "https://api.example.com",
                requiredScopes: ["api.read"])
        )
        .get { _, context in "hello \(context.principal?.subject ?? "")" }
    let app = Application(router: router, configuration: .init(address: .hostname("0.0.0.0", port: 8080)))
    try await app.runService()
    // docs/resource-server.md hummingbird ends
}

/// docs/resource-server.md quotes the example above word for word.
struct HummingbirdResourceServerDocsExamplesTests {
    @Test func theResourceServerPageQuotesTheCompiledHummingbirdExample() throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = here.deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/resource-server.md"), encoding: .utf8)
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let begin = try #require(source.range(of: "    // docs/resource-server.md hummingbird begins\n"))
        let end = try #require(source.range(of: "    // docs/resource-server.md hummingbird ends"))
        let example = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : String($0) }.joined(separator: "\n")
        #expect(
            page.contains("```swift\n" + example + "```"),
            "docs/resource-server.md's hummingbird example differs from HummingbirdResourceServerDocsExamples.swift")
    }
}
#endif
