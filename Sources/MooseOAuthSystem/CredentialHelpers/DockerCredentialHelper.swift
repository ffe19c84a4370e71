#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseJWT

/// The docker credential helper protocol (github.com/docker/docker-credential-helpers, "Development"):
/// docker runs `docker-credential-<name> <action>`, writes the action's input on standard input and
/// reads the answer on standard output.
///
/// | action  | standard input               | standard output                                   |
/// |---------|------------------------------|---------------------------------------------------|
/// | `get`   | the server URL               | `{"ServerURL":…,"Username":…,"Secret":…}`, or `notFound` (exit 1) |
/// | `store` | `{"ServerURL":…,"Username":…,"Secret":…}` | nothing                              |
/// | `erase` | the server URL               | nothing                                           |
/// | `list`  | nothing                      | `{"<server URL>":"<username>",…}`                 |
///
/// ```swift
/// let serverURL = try DockerCredentialHelper.serverURL(parsing: standardInput)
/// let host = DockerCredentialHelper.host(ofServerURL: serverURL)       // "registry.example.com"
/// print(DockerCredentials(serverURL: serverURL, username: "oauth2accesstoken", secret: token).serialized())
/// ```
public enum DockerCredentialHelper {
    /// The helper's actions (its first argument).
    public enum Action: String, Sendable, CaseIterable {
        /// Answer with the credentials for a server URL.
        case get
        /// Keep credentials (`docker login`).
        case store
        /// Forget a server's credentials (`docker logout`).
        case erase
        /// Name every server the helper has credentials for, with their usernames.
        case list
    }

    /// The answer to `get` for a server the helper has no credentials for (with exit status 1): docker
    /// looks for this very text (the helpers' `ErrCredentialsNotFound`).
    public static let notFound = "credentials not found in native keychain"

    /// The largest input read (64 KiB).
    public static let maximumInputSize = 64 * 1024

    /// The server URL of a `get` or `erase` input: its bytes, ASCII spaces, tabs, CRs and LFs around
    /// it dropped (docker writes no newline, people testing by hand do).
    ///
    /// - Throws: `CredentialHelperError.inputTooLarge` beyond `maximumInputSize` bytes.
    public static func serverURL(parsing bytes: [UInt8]) throws(CredentialHelperError) -> String {
        guard bytes.count <= maximumInputSize else {
            throw CredentialHelperError(
                CredentialHelperError.inputTooLarge, "the server URL is larger than \(maximumInputSize) bytes")
        }
        return trimmed(bytes[...])
    }

    /// The host (with `:port` when given) of a server URL as docker names registries: `https://host:port/…`,
    /// or a bare `host[:port][/…]`; what a helper looks a registry up by.
    public static func host(ofServerURL serverURL: String) -> String {
        let trimmed = Self.trimmed(serverURL.utf8[...])
        if let url = URL(string: trimmed), let host = url.host { return url.port.map { "\(host):\($0)" } ?? host }
        return String(trimmed.split(separator: "/").first ?? "")
    }

    /// The answer to `list`: one member per server URL, its username as the value (keys sorted, so the
    /// answer is the same every time).
    public static func listAnswer(_ usernames: [String: String]) -> String {
        var object: JSONObject = [:]
        for serverURL in usernames.keys.sorted() { object[serverURL] = usernames[serverURL].map { .string($0) } }
        return JSONValue.object(object).serialized()
    }

    /// `bytes` without leading and trailing ASCII spaces, tabs, CRs and LFs (on bytes: "\r\n" is one
    /// Swift Character).
    static func trimmed(_ bytes: some Collection<UInt8>) -> String {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        let start = bytes.drop(while: isSpace)
        var end = start.count
        for byte in start.reversed() {
            guard isSpace(byte) else { break }
            end -= 1
        }
        return String(decoding: start.prefix(end), as: UTF8.self)
    }
}

/// Credentials as docker's credential helpers exchange them: the input of `store` and the answer to
/// `get` (docker-credential-helpers' `credentials.Credentials`). Its `description` never shows the secret.
///
/// Docker sends `Username` `<token>` for an identity token (a refresh token it trades at the
/// registry's token service); any other username goes with a password or, as here, an access token
/// the registry takes as a password (`oauth2accesstoken` is the name Google's registries expect).
public struct DockerCredentials: Sendable, Hashable, CustomStringConvertible {
    /// `ServerURL`: the registry.
    public var serverURL: String
    /// `Username`.
    public var username: String
    /// `Secret`: the password or token.
    public var secret: String

    /// Credentials for `serverURL`.
    public init(serverURL: String, username: String, secret: String) {
        self.serverURL = serverURL
        self.username = username
        self.secret = secret
    }

    /// Reads a `store` input: a JSON object with string members `ServerURL` and `Username` (both
    /// non-empty, as the helpers require) and `Secret` (empty when absent); other members are ignored.
    ///
    /// - Throws: `CredentialHelperError.inputTooLarge` beyond `DockerCredentialHelper.maximumInputSize`
    ///   bytes; `.malformedInput` for anything else than such an object.
    public init(parsing bytes: [UInt8]) throws(CredentialHelperError) {
        guard bytes.count <= DockerCredentialHelper.maximumInputSize else {
            throw CredentialHelperError(
                CredentialHelperError.inputTooLarge,
                "the credentials are larger than \(DockerCredentialHelper.maximumInputSize) bytes")
        }
        guard case .object(let object)? = try? JSONValue(parsing: bytes, maximumDepth: 8),
            let serverURL = object["ServerURL"]?.stringValue, !serverURL.isEmpty,
            let username = object["Username"]?.stringValue, !username.isEmpty
        else {
            throw CredentialHelperError(
                CredentialHelperError.malformedInput,
                "the credentials are not a JSON object with ServerURL and Username strings")
        }
        let secret = object["Secret"]
        guard secret == nil || secret?.stringValue != nil else {
            throw CredentialHelperError(CredentialHelperError.malformedInput, "the credentials' Secret is not a string")
        }
        self.init(serverURL: serverURL, username: username, secret: secret?.stringValue ?? "")
    }

    /// The answer to `get`: `{"ServerURL":…,"Username":…,"Secret":…}`, one line of JSON.
    public func serialized() -> String {
        let object: JSONObject = [
            "ServerURL": .string(serverURL), "Username": .string(username), "Secret": .string(secret)
        ]
        return JSONValue.object(object).serialized()
    }

    /// The server URL and username; never the secret.
    public var description: String { "DockerCredentials(\(serverURL), \(username), secret redacted)" }
}
