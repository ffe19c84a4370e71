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

/// `--issuer` (or a profile's issuer) checked before anything is sent.
enum IssuerOption {
    /// A plain-http issuer on another machine is a usage error (exit 2): codes, tokens and secrets
    /// never cross a network in clear text (plain http is for 127.0.0.1, ::1 and localhost only).
    static func check(_ issuer: String, option: String = "--issuer") throws {
        if let problem = problem(issuer, option: option) { throw CLIError.usage(problem) }
    }

    /// What is wrong with `issuer` (see `check`), or `nil`. An issuer is an absolute URL without
    /// spaces, user information, query or fragment (RFC 8414 §2), its port at most 65535: anything
    /// else is a usage error before a request is attempted (not an outage).
    static func problem(_ issuer: String, option: String = "--issuer") -> String? {
        do {
            _ = try DPoP.normalizedProofTarget(issuer)
        } catch {
            let reason =
                error.message.contains("query or fragment")
                ? "it has a query or fragment"
                : error.message.hasPrefix("URI ") ? "the URL " + error.message.dropFirst(4) : error.message
            return "\(option) \(issuer) is not a usable issuer URL (\(reason)); "
                + "an issuer is https://host[:port][/path], with no spaces, query or fragment"
        }
        guard let url = URL(string: issuer), url.scheme?.lowercased() == "http", !TransportSecurity.permits(url) else {
            return nil
        }
        return
            "\(option) \(issuer) is plain http to another machine: use https (plain http is allowed only to 127.0.0.1, ::1 or localhost)"
    }
}
