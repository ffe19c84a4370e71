// docs/http.md, ```swift block 1: the region is quoted there word for word (DocSnippetTests).
import Foundation
import MooseHTTP
import MooseURLSession

func http1() async throws {
    // snippet begins
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
            case .repository(let owner, let name), .issues(let owner, let name, _),
                .createIssue(let owner, let name, _):
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

    let client = APIClient(
        transport: URLSessionTransport(configuration: .init(userAgent: "my-app/1.0")),
        middlewares: [], // AuthMiddleware, your own…
        retryPolicy: RetryPolicy(maxAttempts: 3)) // 408/429/5xx, Retry-After honoured, idempotent only
    let repo = try await client.decode(Repository.self, from: GitHubAPI.repository(owner: "apple", name: "swift"))
    // snippet ends
    _ = repo
}
