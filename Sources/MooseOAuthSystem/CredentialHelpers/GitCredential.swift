#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import MooseJWT

/// One `key=value` attribute of git's credential protocol (git-credential(1), "INPUT/OUTPUT FORMAT").
public struct GitCredentialAttribute: Sendable, Hashable {
    /// The key (`protocol`, `host`, `path`, `username`, `password`, `capability[]`, …): any bytes but
    /// `=`, newline and NUL.
    public var key: String
    /// The value: any bytes but newline and NUL, as they are (git quotes nothing).
    public var value: String

    /// An attribute; `GitCredentialAnswer.serialized()` checks that git can read it back.
    public init(_ key: String, _ value: String) {
        self.key = key
        self.value = value
    }
}

/// The actions git asks a credential helper for (gitcredentials(7), "CUSTOM HELPERS"): the helper's
/// first argument.
public enum GitCredentialAction: String, Sendable, CaseIterable {
    /// Answer with a credential for the description on standard input (or nothing: git asks its next helper).
    case get
    /// git used the credential successfully: keep it, if the helper keeps credentials.
    case store
    /// git's credential was refused (an HTTP 401): forget it, or renew it.
    case erase
}

/// What git tells a credential helper on standard input (git-credential(1), "INPUT/OUTPUT FORMAT"):
/// `key=value` lines up to a blank line or the end, read as git itself reads them — a trailing CR
/// dropped, a line without `=` or with a NUL byte refused, the last value of a key winning, and a key
/// ending in `[]` (`capability[]`, `wwwauth[]`) holding a list that an empty value clears.
///
/// ```swift
/// let request = try GitCredentialRequest(parsing: standardInput)
/// request.host                // "git.example.com:8443"
/// request.acceptsAuthType     // git ≥ 2.46 announced capability[]=authtype
/// ```
public struct GitCredentialRequest: Sendable {
    /// The largest input read (64 KiB): a description is a few short lines.
    public static let maximumSize = 64 * 1024
    /// The most attributes read (256).
    public static let maximumAttributes = 256

    /// The attributes in the order git sent them (a key may come several times).
    public let attributes: [GitCredentialAttribute]

    /// A request of `attributes` (for tests, and helpers that get their description another way).
    public init(attributes: [GitCredentialAttribute]) { self.attributes = attributes }

    /// Reads the attributes git wrote, up to the first blank line (or the end).
    ///
    /// - Throws: `CredentialHelperError.inputTooLarge` beyond `maximumSize` bytes or `maximumAttributes`
    ///   attributes; `.malformedInput` for a line without `=` or with a NUL byte.
    public init(parsing bytes: [UInt8]) throws(CredentialHelperError) {
        guard bytes.count <= Self.maximumSize else {
            throw CredentialHelperError(
                CredentialHelperError.inputTooLarge,
                "the credential description is larger than \(Self.maximumSize) bytes")
        }
        var attributes: [GitCredentialAttribute] = []
        for rawLine in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            var line = rawLine[...]
            if line.last == 0x0D { line.removeLast() }
            if line.isEmpty { break }
            guard !line.contains(0), let equals = line.firstIndex(of: UInt8(ascii: "=")) else {
                throw CredentialHelperError(
                    CredentialHelperError.malformedInput, "credential input lines are key=value")
            }
            guard attributes.count < Self.maximumAttributes else {
                throw CredentialHelperError(
                    CredentialHelperError.inputTooLarge,
                    "the credential description has more than \(Self.maximumAttributes) attributes")
            }
            attributes.append(
                GitCredentialAttribute(
                    String(decoding: line[..<equals], as: UTF8.self),
                    String(decoding: line[(equals + 1)...], as: UTF8.self)))
        }
        self.attributes = attributes
    }

    /// The value of the single-valued attribute `key` (the last one given, as git reads it); keys
    /// are compared byte for byte.
    public func value(_ key: String) -> String? {
        attributes.last { $0.key.utf8.elementsEqual(key.utf8) }?.value
    }

    /// The values of the multi-valued attribute `key` (`capability[]`, `wwwauth[]`), in order; an
    /// empty value clears those before it (git-credential(1)).
    public func values(_ key: String) -> [String] {
        var values: [String] = []
        for attribute in attributes where attribute.key.utf8.elementsEqual(key.utf8) {
            if attribute.value.isEmpty { values.removeAll() } else { values.append(attribute.value) }
        }
        return values
    }

    /// `host`: the remote's host name, with `:port` when the URL had one; `nil` when git sent none.
    public var host: String? { value("host") }

    /// The capabilities git announced (`capability[]`): `authtype` (git ≥ 2.46), `state`.
    public var capabilities: [String] { values("capability[]") }

    /// `true` when git announced `capability[]=authtype` (git ≥ 2.46): it takes `authtype` and
    /// `credential` (an `Authorization` scheme and its credentials) instead of a username and password.
    public var acceptsAuthType: Bool { capabilities.contains { $0.utf8.elementsEqual("authtype".utf8) } }

    /// What git presented and was refused, in an `erase`: `password`, else `credential`.
    public var presentedSecret: String? { value("password") ?? value("credential") }
}

/// A credential helper's answer to `get` (git-credential(1)): `key=value` lines on standard output.
///
/// ```swift
/// let answer = try GitCredentialAnswer.accessToken(token, expiresAt: expiry, username: "x-access-token", for: request)
/// FileHandle.standardOutput.write(Data(try answer.serialized().utf8))
/// ```
public struct GitCredentialAnswer: Sendable {
    /// The attributes, in the order they are written.
    public var attributes: [GitCredentialAttribute]

    /// An answer of `attributes`.
    public init(attributes: [GitCredentialAttribute]) { self.attributes = attributes }

    /// An OAuth access token for git to present. To a git that announced `capability[]=authtype`
    /// (≥ 2.46): `capability[]=authtype`, `authtype=Bearer`, `credential=<token>` — sent as
    /// `Authorization: Bearer` (RFC 6750); to an older one: `username` and `password=<token>` (Basic,
    /// as GitHub and GitLab take tokens). With `expiresAt`, `password_expiry_utc` (seconds since 1970),
    /// after which git (≥ 2.41) asks again rather than present an expired token.
    ///
    /// - Throws: `CredentialHelperError.unrepresentableValue` when `token` has characters outside
    ///   RFC 6750 §2.1's b64token set (it could not be sent as a header, and is not handed to git).
    public static func accessToken(
        _ token: String, expiresAt: Date?, username: String, for request: GitCredentialRequest
    ) throws(CredentialHelperError) -> GitCredentialAnswer {
        guard TokenCharacters.isB64Token(token) else {
            throw CredentialHelperError(
                CredentialHelperError.unrepresentableValue,
                "the access token has characters outside RFC 6750's b64token set; it is not handed to git")
        }
        var attributes: [GitCredentialAttribute]
        if request.acceptsAuthType {
            attributes = [.init("capability[]", "authtype"), .init("authtype", "Bearer"), .init("credential", token)]
        } else {
            attributes = [.init("username", username), .init("password", token)]
        }
        if let expiresAt {
            attributes.append(
                .init("password_expiry_utc", String(Int64(saturating: expiresAt.timeIntervalSince1970))))
        }
        return GitCredentialAnswer(attributes: attributes)
    }

    /// The answer as git reads it: one `key=value` line each, every line ending in a newline.
    ///
    /// - Throws: `CredentialHelperError.unrepresentableValue` for an empty key, a key with `=`, or a
    ///   key or value with a newline, carriage return or NUL (git would read another attribute, or a
    ///   shorter value).
    public func serialized() throws(CredentialHelperError) -> String {
        var text = ""
        for attribute in attributes {
            let breaks: (UInt8) -> Bool = { $0 == 0x0A || $0 == 0x0D || $0 == 0 }
            guard !attribute.key.isEmpty, !attribute.key.utf8.contains(where: { breaks($0) || $0 == 0x3D }),
                !attribute.value.utf8.contains(where: breaks)
            else {
                throw CredentialHelperError(
                    CredentialHelperError.unrepresentableValue,
                    "the \(attribute.key.utf8.contains(where: breaks) ? "answer" : attribute.key) attribute cannot be "
                        + "written in git's credential protocol (a key with = or a line break, or a value with a line break)"
                )
            }
            text += attribute.key + "=" + attribute.value + "\n"
        }
        return text
    }
}
