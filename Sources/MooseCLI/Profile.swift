import MooseOAuth
import MooseHTTP
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A named CLI configuration — a profile — is the library's `SessionPlan` under the profile's name:
/// which provider, which client and how it authenticates (by reference), which scopes and grant.
/// Kept sealed in its session's row, so an app's `TokenManager.open(key:…)` renews a CLI session (and
/// `moose token` an app's) the same way.
typealias Profile = SessionPlan

extension CLITransport {
    /// `pins` (`--pin-public-key`, or a profile's `public_key_pins`) checked for `issuer`'s host and
    /// written canonically (`sha256//BASE64`); nil when none are given.
    static func pins(_ pins: [String]?, issuer: String) throws -> [String]? {
        guard let pins, !pins.isEmpty else { return nil }
        guard let host = URL(string: issuer)?.host else {
            throw CLIError.usage("--pin-public-key needs an issuer URL with a host")
        }
        do {
            return try PublicKeyPins([host: pins]).pins(for: host)
        } catch {
            throw CLIError.usage(
                "--pin-public-key: \(error.message) (a pin is sha256// and the base64 SHA-256 of the server's "
                    + "SubjectPublicKeyInfo: openssl x509 -in server.pem -pubkey -noout | openssl pkey -pubin -outform DER "
                    + "| openssl dgst -sha256 -binary | base64)")
        }
    }
}

extension LoginCommand {
    /// `--pin-public-key` pins the issuer's host, so a login that discovers its issuer from `--resource`
    /// alone refuses it rather than log in unpinned.
    func validate() throws {
        if !pinPublicKey.isEmpty, resource != nil, issuer == nil {
            throw ValidationError(
                "--pin-public-key pins the issuer's host: give --issuer with it (a login by --resource alone is not pinned)"
            )
        }
    }
}
