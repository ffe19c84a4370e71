#if ExampleService
import Foundation
import MooseCrypto
import MooseTestSupport
import Testing

/// The README's swift-openapi and AsyncHTTPClient sections quote tools/example-service (compiled with
/// the package and run by ExampleServiceTests) word for word, and the generated client is the one
/// tools/example-service/regenerate makes from today's tools/resource/openapi.yaml.
struct ReadmeExampleServiceTests {
    static let root = LocalServer.repositoryRoot

    @Test(arguments: ["Using Moose with swift-openapi", "Using Moose with AsyncHTTPClient"])
    func theReadmeQuotesTheExampleServiceVerbatim(_ section: String) throws {
        let readme = try String(contentsOfFile: Self.root + "/docs/adapters.md", encoding: .utf8)
        let source = try String(
            contentsOfFile: Self.root + "/tools/example-service/Sources/moose-example-service/main.swift",
            encoding: .utf8)
        let start = try #require(
            source.range(of: "// MARK: README: \(section)\n"), "no README region \(section) in main.swift")
        let end = try #require(source.range(of: "// MARK: README end", range: start.upperBound..<source.endIndex))
        let region = String(source[start.upperBound..<end.lowerBound]).trimmingCharacters(in: .newlines)
        #expect(readme.contains("## \(section)\n"))
        #expect(
            readme.contains("```swift\n" + region + "\n```"),
            "docs/adapters.md's \"\(section)\" differs from tools/example-service's region")
    }

    @Test func theGeneratedClientComesFromTodaysOpenAPIDocument() throws {
        let document = try Data(contentsOf: URL(fileURLWithPath: Self.root + "/tools/resource/openapi.yaml"))
        let recorded = try String(contentsOfFile: Self.root + "/tools/example-service/openapi.sha256", encoding: .utf8)
        #expect(
            Hex.encode(DigestAlgorithm.sha256.hash(document))
                == recorded.trimmingCharacters(in: .whitespacesAndNewlines),
            "tools/resource/openapi.yaml changed: run tools/example-service/regenerate and commit the result")
    }
}
#endif
