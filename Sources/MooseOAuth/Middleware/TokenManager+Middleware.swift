/// The manager's requests, authorized: a middleware over its coordinator.
extension TokenManager {
    /// A middleware for `MooseHTTP`'s `APIClient`: attaches the token, refreshes once on a 401.
    public var middleware: AuthMiddleware { AuthMiddleware(coordinator: coordinator) }
}
