import MooseHTTP
import MooseOAuth
import MooseOAuthSystem
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `moose login --workload SOURCE`: a CI job's or a pod's own identity token, exchanged for tokens at
/// the provider (RFC 8693 token exchange, or the RFC 7523 JWT bearer grant), with no secret on disk.
/// The profile keeps the source, not a token: every renewal asks the source again.
enum WorkloadLogin {
    /// The grants a workload login can use.
    static let grants = WorkloadGrant.Grant.allCases.map(\.rawValue)

    /// The source `spec` names (`SessionPlan.identity`), a bad spec a usage error; a `file:` path is
    /// made absolute first (the session is renewed from any directory, by any process).
    static func source(_ spec: String, transport: any HTTPTransport) throws -> WorkloadIdentity {
        do {
            return try SessionPlan.identity(
                SessionPlan.absoluteWorkload(spec), transport: transport, commands: WorkloadIdentity.command)
        } catch let error as OAuthError where error.code == OAuthError.invalidConfiguration {
            throw CLIError.usage(error.message)
        }
    }
}
