#if MooseObservability
public import CoreMetrics
public import MooseResourceServer

/// Counts a resource server's refusals in swift-metrics: `moose_resource_refusals_total`, by `code`
/// (`missing_credentials`, `unsupported_scheme`, `invalid_request`, `invalid_token`,
/// `insufficient_scope`, `invalid_dpop_proof`, `use_dpop_nonce`, `temporarily_unavailable`) and `status`
/// (the HTTP status answered). Hand ``onRefusal`` to a middleware (MooseHummingbird's or MooseVapor's
/// `ResourceServerMiddleware`, `ResourceServerAuthenticator`, `ResourceServerOpenAPIMiddleware`): each refusal it
/// answers is counted, and a dashboard shows a flood of forged tokens or a key set that stopped matching
/// as a rising `invalid_token` line, a provider's JWKS that cannot be had as `temporarily_unavailable`.
///
/// ```swift
/// let refusals = RefusalCounter()
/// router.add(middleware: ResourceServerMiddleware(server: server, publicBaseURL: url, onRefusal: refusals.onRefusal))
/// ```
///
/// Only those two bounded values become dimensions: never the refusal's `reason` (free text naming the
/// failed check), a token, a proof, a client or a path. The reason goes to the middleware's log instead.
/// A no-op until the app bootstraps a metrics backend (`MetricsSystem.bootstrap`).
public struct RefusalCounter: Sendable {
    /// The counter's label.
    public static let label = "moose_resource_refusals_total"
    private let metrics: (any MetricsFactory)?

    /// Counts into `metrics`; default: the bootstrapped system (tests pass their own).
    public init(metrics: (any MetricsFactory)? = nil) {
        self.metrics = metrics
    }

    /// Counts `refusal` once, by its code and status.
    public func count(_ refusal: ResourceServerRefusal) {
        Counter(
            label: Self.label, dimensions: [("code", refusal.code.description), ("status", String(refusal.status))],
            factory: metrics ?? MetricsSystem.factory
        ).increment()
    }

    /// ``count(_:)`` as the closure the middlewares' `onRefusal` takes.
    public var onRefusal: @Sendable (ResourceServerRefusal) -> Void {
        { refusal in count(refusal) }
    }
}
#endif
