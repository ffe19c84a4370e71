#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import MooseJWT

/// The one rule an issuer URL must meet before anything is sent to it — the same for discovery, for
/// `SessionPlan.resolve(name:given:profile:kept:)` and for the `moose` CLI's `--issuer`:
///
/// 1. an absolute `http` or `https` URL with a host;
/// 2. usable as an issuer (RFC 8414 §2): printable ASCII without spaces, no user information, a port
///    of at most 65535, no query and no fragment;
/// 3. `https`, or plain `http` to this machine only (127.0.0.1, ::1, localhost; RFC 8252 §8.3): codes,
///    tokens and secrets never cross a network in clear text.
///
/// ```swift
/// if let problem = IssuerRule.problem(input) { print("the issuer \(input) \(problem.predicate)") }
/// let url = try IssuerRule.check("https://id.example.com")
/// ```
public enum IssuerRule {
    /// What is wrong with an issuer: the `OAuthError` code it is reported with and the words that
    /// follow the issuer in a sentence ("is not an absolute https URL …"), so a caller can name where
    /// the issuer came from (a flag, a config file) in front of them.
    public struct Problem: Sendable, Equatable {
        /// `OAuthError.invalidConfiguration` for a URL that is not usable as an issuer (rules 1 and 2),
        /// `OAuthError.insecureEndpoint` for plain `http` to another machine (rule 3).
        public let code: OAuthError.Code
        /// The predicate, starting with "is": what is wrong and what an issuer looks like instead.
        public let predicate: String
    }

    /// The first rule `issuer` breaks, or `nil` when it is usable. A pure function: no request is made.
    ///
    /// - Parameter issuer: the issuer URL as given, compared as bytes (nothing is trimmed or decoded).
    /// - Returns: the problem (see `Problem`), or `nil`.
    public static func problem(_ issuer: String) -> Problem? {
        let notAbsolute = Problem(
            code: OAuthError.invalidConfiguration,
            predicate: "is not an absolute https URL (like https://id.example.com)")
        do {
            _ = try DPoP.normalizedProofTarget(issuer)
        } catch {
            if error.message.contains("not absolute") { return notAbsolute }
            let reason =
                error.message.contains("query or fragment")
                ? "it has a query or fragment"
                : error.message.hasPrefix("URI ") ? "the URL " + error.message.dropFirst(4) : error.message
            return Problem(
                code: OAuthError.invalidConfiguration,
                predicate: "is not a usable issuer URL (\(reason)); "
                    + "an issuer is https://host[:port][/path], with no spaces, query or fragment")
        }
        guard let url = URL(string: issuer), let scheme = url.scheme?.lowercased(),
            scheme == "https" || scheme == "http", let host = url.host, !host.isEmpty
        else { return notAbsolute }
        guard TransportSecurity.permits(url) else {
            return Problem(
                code: OAuthError.insecureEndpoint,
                predicate: "is plain http to another machine: use https "
                    + "(plain http is allowed only to 127.0.0.1, ::1 or localhost)")
        }
        return nil
    }

    /// `issuer` as a URL, when it meets the rule.
    ///
    /// - Parameter issuer: the issuer URL as given.
    /// - Returns: the parsed URL.
    /// - Throws: `OAuthError` with the problem's code (`invalidConfiguration` or `insecureEndpoint`)
    ///   and the message "the issuer ISSUER " followed by its predicate.
    @discardableResult
    public static func check(_ issuer: String) throws -> URL {
        if let problem = problem(issuer) {
            throw OAuthError(problem.code, "the issuer \(issuer) \(problem.predicate)")
        }
        guard let url = URL(string: issuer) else {
            throw OAuthError(OAuthError.invalidConfiguration, "the issuer \(issuer) is not a URL")
        }
        return url
    }
}
