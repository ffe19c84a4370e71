// docs/http.md, ```swift block 2: the region is quoted there word for word (DocSnippetTests).
import Foundation
import MooseHTTP
import MooseURLSession

func http2(bigFileURL: URL, destination: URL) async throws {
    // snippet begins
    let transfer = try URLSessionTransport().download(APIRequest(url: bigFileURL), to: destination)
    for await step in transfer.progress { print(Int((step.fractionCompleted ?? 0) * 100), "%") }
    let response = try await transfer.response
    // snippet ends
    _ = response
}
