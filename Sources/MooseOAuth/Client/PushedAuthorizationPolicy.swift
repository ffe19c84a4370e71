/// When the authorization code flow pushes its parameters to the server first (RFC 9126) and sends
/// the browser only `client_id` and the `request_uri` it got back.
public enum PushedAuthorizationPolicy: Sendable, Hashable {
    /// Push whenever the server advertises `pushed_authorization_request_endpoint` (always when it
    /// sets `require_pushed_authorization_requests`). The default.
    case whenAdvertised
    /// Push, and fail when the server has no PAR endpoint.
    case always
    /// Never push (a server that requires PAR will refuse the login).
    case never
}
