import Foundation
import MooseHTTP
import Testing
import HTTPTypes

// The README's "Making requests" example, compiled and checked (requests are built, not sent).
struct Repository: Decodable { let full_name: String; let stargazers_count: Int }
struct NewIssue: Encodable, Sendable { let title: String; let body: String }

enum GitHubAPI: Endpoint {
    case repository(owner: String, name: String)
    case issues(owner: String, name: String, labels: [String])
    case createIssue(owner: String, name: String, NewIssue)

    var baseURL: URL { URL(string: "https://api.github.com")! }
    var path: String {
        switch self {
        case .repository: "/repos/{owner}/{name}"
        case .issues, .createIssue: "/repos/{owner}/{name}/issues"
        }
    }
    var pathParameters: [String: String] { // each value becomes one percent-encoded segment
        switch self {
        case .repository(let owner, let name), .issues(let owner, let name, _), .createIssue(let owner, let name, _):
            ["owner": owner, "name": name]
        }
    }
    var method: HTTPRequest.Method { if case .createIssue = self { .post } else { .get } }
    var query: [QueryItem] {
        if case .issues(_, _, let labels) = self { [QueryItem("labels", array: labels)] } else { [] }
    }
    var arrayEncoding: ArrayEncoding { .commaSeparated } // labels=bug,ui
    var body: EndpointBody { if case .createIssue(_, _, let issue) = self { .json(issue) } else { .none } }
    var requiresAuthentication: Bool { true }

    struct APIError: Error, Decodable { let message: String }
    func serverError(for response: APIResponse) -> (any Error)? { decodeServerError(APIError.self, from: response) }
}

struct ReadmeExampleTests {
    @Test func readmeEndpointBuildsTheRequestsItDescribes() throws {
        let builder = RequestBuilder()
        let repo = try builder.build(GitHubAPI.repository(owner: "apple", name: "swift"))
        #expect(repo.url?.absoluteString == "https://api.github.com/repos/apple/swift" && repo.method == .get)
        let issues = try builder.build(
            GitHubAPI.issues(owner: "apple", name: "swift", labels: ["bug", "good first issue"]))
        #expect(
            issues.url?.absoluteString
                == "https://api.github.com/repos/apple/swift/issues?labels=bug,good%20first%20issue")
        let create = try builder.build(GitHubAPI.createIssue(owner: "a/b", name: "c", NewIssue(title: "t", body: "b")))
        #expect(create.url?.absoluteString == "https://api.github.com/repos/a%2Fb/c/issues")
        #expect(create.method == .post && create.headerFields[.contentType] == "application/json")
        #expect(create.body == Data(#"{"body":"b","title":"t"}"#.utf8))
    }
}

/// The README quotes tools/example (built and run by tools/test) word for word: the quote cannot rot.
struct ReadmeQuotesTheExampleTests {
    @Test func theAppSectionQuotesToolsExampleVerbatim() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("docs/library.md"), encoding: .utf8)
        let example = try String(
            contentsOf: root.appendingPathComponent("tools/example/Sources/moose-example/main.swift"), encoding: .utf8)
        #expect(
            readme.contains("```swift\n" + example.trimmingCharacters(in: .newlines) + "\n```"),
            "docs/library.md's app section differs from tools/example/Sources/moose-example/main.swift")
    }
}
