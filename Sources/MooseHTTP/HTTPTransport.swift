/// Sends requests. The default on Apple platforms and in apps is URLSession (`MooseURLSession`);
/// server apps use AsyncHTTPClient (`MooseAsyncHTTPClient`); the `moose` CLI uses `CurlTransport`,
/// which loads libcurl only when a request is made.
///
/// A transport never follows redirects (token traffic must not be forwarded) and bounds the
/// response size; `APIClient` enforces each request's `timeout` on top of whatever the transport does.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the response, whatever its status. Throws `HTTPRequestError` for
    /// transport failures and `CancellationError` when the task is cancelled.
    func send(_ request: APIRequest) async throws -> APIResponse
}
