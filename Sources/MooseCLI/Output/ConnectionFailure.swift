import MooseHTTP
import MooseJWT
import MooseOAuth
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Failures to reach a provider that are no outage, said for what they are (exit 1, never 3's "try
/// again later", never a CA hint): a host name that did not resolve, and `https` to a server that
/// does not speak TLS.
enum ConnectionFailure {
    /// The CLI's error for `error` when its cause is one of these, else `nil`. `context` goes first
    /// ("cannot use issuer …").
    static func cliError(_ error: OAuthError, context: String? = nil) -> CLIError? {
        guard let cause = error.underlying as? HTTPRequestError else { return nil }
        return cliError(cause, context: context)
    }

    /// The CLI's error for a transport error of one of these kinds, else `nil`.
    static func cliError(_ cause: HTTPRequestError, context: String? = nil) -> CLIError? {
        let prefix = context.map { "\($0): " } ?? ""
        if cause.code == HTTPRequestError.nameNotResolved {
            return CLIError.failed(
                "\(prefix)\(cause.message): check the host name (a typo in the URL?) and this machine's DNS "
                    + "[\(cause.code)]")
        }
        if cause.code == HTTPRequestError.notTLS {
            return CLIError.failed(
                "\(prefix)\(cause.message): that port answers without TLS (plain http?); check the URL's scheme "
                    + "and port — trusting another certificate would not help [\(cause.code)]")
        }
        return nil
    }
}

/// `--issuer` (or a profile's issuer) checked before anything is sent, by the library's one issuer
/// rule (`IssuerRule`): breaking it is a usage error (exit 2), never an outage.
enum IssuerOption {
    /// Throws the usage error `problem(_:option:)` names, if any.
    static func check(_ issuer: String, option: String = "--issuer") throws {
        if let problem = problem(issuer, option: option) { throw CLIError.usage(problem) }
    }

    /// What is wrong with `issuer` (`IssuerRule.problem`), said of `option`, or `nil`.
    static func problem(_ issuer: String, option: String = "--issuer") -> String? {
        IssuerRule.problem(issuer).map { "\(option) \(Terminal.safe(issuer)) \($0.predicate)" }
    }
}
