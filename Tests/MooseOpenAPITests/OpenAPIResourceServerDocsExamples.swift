// docs/resource-server.md, "Quick start: swift-openapi": the code between the markers is quoted there word
// for word (OpenAPIResourceServerDocsExamplesTests checks it), and compiled here with the trait.
#if ExampleService
import Foundation
import Logging
import MooseOpenAPI
import MooseResourceServer
import OpenAPIRuntime
import Testing

func openAPIResourceServer(server: ResourceServer) -> (ResourceServerOpenAPIMiddleware, @Sendable () -> String) {
    // docs/resource-server.md openapi begins
    let middleware = ResourceServerOpenAPIMiddleware(
        server: server, publicBaseURL: "https://api.example.com",
        requiredScopes: ["api.read"], // every operation not named below
        scopesByOperation: ["deleteItem": ["api.read", "api.write"]], // operationId → the scopes it needs
        publicOperations: ["getHealth"], // served without a token
        logger: Logger(label: "api.auth"), refusalLogLevel: .info, // each refusal's reason, never the token
        onRefusal: { refusal in print("refused: \(refusal.code)") }) // count here
    // With the generated server and your framework's transport (swift-openapi-hummingbird, -vapor…):
    // try Handler().registerHandlers(on: transport, serverURL: URL(string: "/")!, middlewares: [middleware])

    // In a handler (a method of the generated APIProtocol): the caller the middleware verified.
    let greeting: @Sendable () -> String = {
        guard let caller = ResourceServerPrincipal.current else { return "hello, whoever you are" } // getHealth
        return "hello \(caller.subject) (client \(caller.clientID), scopes \(caller.scopes.joined(separator: " ")))"
    }
    // docs/resource-server.md openapi ends
    return (middleware, greeting)
}

/// docs/resource-server.md quotes the example above word for word, and the example's middleware asks for
/// the scopes it says it does.
struct OpenAPIResourceServerDocsExamplesTests {
    @Test func theResourceServerPageQuotesTheCompiledOpenAPIExample() throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = here.deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/resource-server.md"), encoding: .utf8)
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let begin = try #require(source.range(of: "    // docs/resource-server.md openapi begins\n"))
        let end = try #require(source.range(of: "    // docs/resource-server.md openapi ends"))
        let example = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : String($0) }.joined(separator: "\n")
        #expect(
            page.contains("```swift\n" + example + "```"),
            "docs/resource-server.md's openapi example differs from OpenAPIResourceServerDocsExamples.swift")

        let server = ResourceServer(
            configuration: ResourceServerConfiguration(
                issuer: "https://id.example.com",
                resource: "https://api.example.com", algorithms: [.es256]),
            keys: StaticAccessTokenKeys([]))
        let (middleware, greeting) = openAPIResourceServer(server: server)
        #expect(middleware.requiredScopes(for: "listItems") == ["api.read"])
        #expect(middleware.requiredScopes(for: "deleteItem") == ["api.read", "api.write"])
        #expect(middleware.publicOperations == ["getHealth"])
        #expect(middleware.refusalLogLevel == .info && middleware.logger.label == "api.auth")
        #expect(middleware.onRefusal != nil)
        #expect(greeting() == "hello, whoever you are")
    }
}
#endif
