import Foundation
import Testing

/// The README's first screen quotes ReadmeQuickStart.swift (compiled with these tests) word for word.
struct ReadmeQuickStartTests {
    @Test func theReadmeQuotesTheQuickStartVerbatim() throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = here.deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: here.appendingPathComponent("ReadmeQuickStart.swift"), encoding: .utf8)
        let begin = try #require(source.range(of: "// README quick start begins\n"))
        let end = try #require(source.range(of: "// README quick start ends"))
        let example = String(source[begin.upperBound..<end.lowerBound])
        #expect(
            readme.contains("```swift\n" + example + "```"), "README's quick start differs from ReadmeQuickStart.swift")
    }
}
