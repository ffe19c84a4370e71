import Foundation
import Testing

/// Every ```swift block of README.md and docs/*.md is compiled: block `n` (1-based, counting every fence
/// that opens with ```swift) of `docs/<page>.md` is `Tests/DocSnippetTests/<page>-<n>.swift` (README.md:
/// `README-<n>.swift`), whose lines between `// snippet begins` and `// snippet ends` are the block's lines
/// but its `import`s, word for word once each side's common indentation is removed (the region may sit in a
/// wrapper function or type: set-up and stubs around it are free). Every `import` of the block is one of the
/// file's. Adapter snippets' files are wrapped in `#if Trait`, as the adapters' own tests are. A block that
/// another test target also quotes (README's quick start in MooseOAuthTests/ReadmeQuickStart.swift, the
/// Combine example, the example service) still has its file here: one rule, one place to look.
///
/// What is not compiled here, explicitly:
/// - a Package.swift excerpt, fenced ```swift manifest (a manifest is no test target's code): every
///   `.product(name:package: "moose")` it names must be a product of the root Package.swift, and every
///   trait it names one of its traits;
/// - the pages in `exemptDocs` below.
struct DocSnippetTests {
    /// Pages checked some other way, and how.
    static let exemptDocs: [String: String] = [
        // Its app tests are tools/example/Tests/SignInTests, compiled and run in tools/example (a package
        // of its own depending on this one); tools/example/check-docs checks the page shows them as they are.
        "testing.md": "tools/example/check-docs"
    ]

    static let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let root = here.deletingLastPathComponent().deletingLastPathComponent()

    /// A fenced block: its info string (`swift`, `swift manifest`) and its lines.
    struct Block {
        let info: String
        let lines: [String]
    }

    /// Every block whose fence opens with ```swift, in order (fences may be indented, in a list item).
    static func swiftBlocks(_ markdown: String) -> [Block] {
        var blocks: [Block] = []
        var current: (info: String, lines: [String])?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if let open = current {
                if trimmed == "```" {
                    blocks.append(Block(info: open.info, lines: open.lines))
                    current = nil
                } else {
                    current?.lines.append(line)
                }
            } else if trimmed.hasPrefix("```swift") {
                current = (String(trimmed.dropFirst(3)).trimmingCharacters(in: .whitespaces), [])
            }
        }
        return blocks
    }

    static func isImport(_ line: String) -> Bool {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        return trimmed.hasPrefix("import ") || trimmed.hasPrefix("@testable import ")
    }

    /// The lines with their common leading indentation removed, trailing spaces dropped, and without
    /// blank lines at either end.
    static func normalized(_ lines: [String]) -> [String] {
        var lines = lines.map { String($0.reversed().drop(while: { $0 == " " }).reversed()) }
        while lines.first?.isEmpty == true { lines.removeFirst() }
        while lines.last?.isEmpty == true { lines.removeLast() }
        let indent = lines.filter { !$0.isEmpty }.map { $0.prefix(while: { $0 == " " }).count }.min() ?? 0
        return lines.map { $0.isEmpty ? $0 : String($0.dropFirst(indent)) }
    }

    /// What is wrong with `file` as block `number` of `doc`, or nil.
    static func problem(doc: String, number: Int, block: Block, file: String) -> String? {
        let place = "\(doc), ```swift block \(number)"
        guard let source = try? String(contentsOf: here.appendingPathComponent(file), encoding: .utf8) else {
            return "\(place): Tests/DocSnippetTests/\(file) is missing (the block is compiled there)"
        }
        let sourceLines = source.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let trimmedSource = sourceLines.map { $0.trimmingCharacters(in: .whitespaces) }
        guard let begin = trimmedSource.firstIndex(of: "// snippet begins"),
            let end = trimmedSource[begin...].firstIndex(of: "// snippet ends")
        else { return "\(place): \(file) has no `// snippet begins` … `// snippet ends` region" }
        for line in block.lines where isImport(line) {
            let wanted = line.trimmingCharacters(in: .whitespaces)
            if !trimmedSource.contains(wanted) { return "\(place): \(file) lacks `\(wanted)`" }
        }
        let shown = normalized(block.lines.filter { !isImport($0) })
        let compiled = normalized(Array(sourceLines[(begin + 1)..<end]))
        for (index, (a, b)) in zip(shown, compiled).enumerated() where a != b {
            return "\(place) differs from \(file) at the region's line \(index + 1):\n  doc:  \(a)\n  file: \(b)"
        }
        if shown.count != compiled.count {
            let first = shown.count < compiled.count ? compiled[shown.count] : shown[compiled.count]
            return "\(place) has \(shown.count) lines, \(file)'s region \(compiled.count); first unmatched: \(first)"
        }
        return nil
    }

    /// What is wrong with a manifest excerpt, or nil: the products and traits it names must exist.
    static func manifestProblem(doc: String, number: Int, block: Block, manifest: String) -> String? {
        let text = block.lines.joined(separator: "\n")
        let products = matches(of: #"\.product\(name: "([^"]+)", package: "moose"\)"#, in: text)
        let traits = matches(of: #"traits: \[([^\]]*)\]"#, in: text).flatMap { matches(of: #""([^"]+)""#, in: $0) }
        for product in products where !manifest.contains(".library(name: \"\(product)\"") {
            return "\(doc), ```swift manifest block \(number) names a product Package.swift lacks: \(product)"
        }
        for trait in traits where !manifest.contains(".trait(name: \"\(trait)\"") {
            return "\(doc), ```swift manifest block \(number) names a trait Package.swift lacks: \(trait)"
        }
        return nil
    }

    static func matches(of pattern: String, in text: String) -> [String] {
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return [] }
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    @Test func everySwiftSnippetInTheDocsIsCompiled() throws {
        let docs = Self.root.appendingPathComponent("docs")
        let pages = try FileManager.default.contentsOfDirectory(atPath: docs.path).filter { $0.hasSuffix(".md") }
            .sorted()
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        var checked = 0
        var problems: [String] = []
        for (doc, url) in [("README.md", Self.root.appendingPathComponent("README.md"))]
            + pages.map({ ("docs/\($0)", docs.appendingPathComponent($0)) })
        {
            let name = url.lastPathComponent
            if doc != "README.md", Self.exemptDocs[name] != nil { continue }
            let stem = url.deletingPathExtension().lastPathComponent
            let markdown = try String(contentsOf: url, encoding: .utf8)
            for (index, block) in Self.swiftBlocks(markdown).enumerated() {
                let number = index + 1
                switch block.info {
                case "swift":
                    let file = "\(stem)-\(number).swift"
                    if let problem = Self.problem(doc: doc, number: number, block: block, file: file) {
                        problems.append(problem)
                    }
                case "swift manifest":
                    if let problem = Self.manifestProblem(doc: doc, number: number, block: block, manifest: manifest) {
                        problems.append(problem)
                    }
                default:
                    problems.append("\(doc), block \(number): unknown fence ```\(block.info)")
                }
                checked += 1
            }
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        #expect(checked > 20, "only \(checked) ```swift blocks found")
    }

    /// The README's install line (its first manifest block) names every product its Swift blocks import.
    @Test func theReadmeInstallLineNamesEveryProductTheQuickStartImports() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let blocks = Self.swiftBlocks(readme)
        let install = try #require(blocks.first { $0.info == "swift manifest" }).lines.joined(separator: "\n")
        let named = Set(Self.matches(of: #"\.product\(name: "([^"]+)", package: "moose"\)"#, in: install))
        let imported = Set(
            blocks.filter { $0.info == "swift" }.flatMap(\.lines).filter(Self.isImport).compactMap {
                $0.split(separator: " ").last.map(String.init)
            })
        for module in imported.sorted() where manifest.contains(".library(name: \"\(module)\"") {
            #expect(named.contains(module), "README's install line does not name \(module), which it imports")
        }
    }
}
