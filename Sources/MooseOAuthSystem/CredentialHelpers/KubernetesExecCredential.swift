#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseJWT

/// The answer of a kubectl exec credential plugin (client-go's "client-go credential plugins",
/// API group client.authentication.k8s.io): an `ExecCredential` document whose `status` carries the
/// bearer token and when it expires, in the API version kubectl asked for in `KUBERNETES_EXEC_INFO`.
///
/// kubectl runs the plugin again once `expirationTimestamp` has passed, so it never holds an expired
/// token, and never asks early: a plugin hands it a token with the token's own expiry.
///
/// ```swift
/// let info = try KubernetesExecCredential.ExecInfo.current()       // KUBERNETES_EXEC_INFO
/// let answer = KubernetesExecCredential(token: token, expiresAt: expiry, answering: info)
/// print(answer.serialized())
/// ```
public struct KubernetesExecCredential: Sendable, Hashable, CustomStringConvertible {
    /// The API versions of `ExecCredential` spoken here.
    public enum APIVersion: String, Sendable, CaseIterable {
        /// `client.authentication.k8s.io/v1` (Kubernetes 1.22+; the default).
        case v1 = "client.authentication.k8s.io/v1"
        /// `client.authentication.k8s.io/v1beta1` (Kubernetes 1.11+).
        case v1beta1 = "client.authentication.k8s.io/v1beta1"
    }

    /// What kubectl tells the plugin in `KUBERNETES_EXEC_INFO`: an `ExecCredential` whose `apiVersion`
    /// is the version it wants back and whose `spec.interactive` says whether the plugin may use the
    /// terminal (standard input is the user's).
    public struct ExecInfo: Sendable, Hashable {
        /// The environment variable kubectl sets (client-go's exec plugin protocol).
        public static let environmentVariable = "KUBERNETES_EXEC_INFO"
        /// The largest `ExecInfo` read (64 KiB).
        public static let maximumSize = 64 * 1024

        /// The version to answer in; `nil` when kubectl named none (answer in v1).
        public var apiVersion: APIVersion?
        /// `spec.interactive`; `nil` when not said.
        public var interactive: Bool?

        /// An `ExecInfo` with these fields (none: what a plugin assumes when kubectl said nothing).
        public init(apiVersion: APIVersion? = nil, interactive: Bool? = nil) {
            self.apiVersion = apiVersion
            self.interactive = interactive
        }

        /// Reads kubectl's `ExecCredential` JSON. A missing (or non-string) `apiVersion` leaves it `nil`.
        ///
        /// - Throws: `CredentialHelperError.malformedInput` when `text` is not a JSON object (or is over
        ///   `maximumSize` bytes); `.unsupportedVersion` when it asks for an API version not in `APIVersion`.
        public init(parsing text: String) throws(CredentialHelperError) {
            guard text.utf8.count <= Self.maximumSize,
                case .object(let object)? = try? JSONValue(parsing: Array(text.utf8))
            else {
                throw CredentialHelperError(
                    CredentialHelperError.malformedInput, "\(Self.environmentVariable) is not a JSON object")
            }
            if let asked = object["apiVersion"]?.stringValue {
                guard let known = APIVersion.allCases.first(where: { $0.rawValue.utf8.elementsEqual(asked.utf8) })
                else {
                    throw CredentialHelperError(
                        CredentialHelperError.unsupportedVersion,
                        "kubectl asks for \(CredentialHelperError.quoted(asked)); the versions spoken are "
                            + APIVersion.allCases.map(\.rawValue).joined(separator: " and "))
                }
                apiVersion = known
            }
            if case .bool(let interactive)? = object["spec"]?["interactive"] { self.interactive = interactive }
        }

        /// This process's `KUBERNETES_EXEC_INFO`, read; `ExecInfo()` when it is unset or empty (an older
        /// kubectl, or a person running the plugin by hand).
        ///
        /// - Throws: as `init(parsing:)`.
        public static func current() throws(CredentialHelperError) -> ExecInfo {
            guard let text = ProcessEnvironment.value(environmentVariable), !text.isEmpty else { return ExecInfo() }
            return try ExecInfo(parsing: text)
        }
    }

    /// The version of the document.
    public var apiVersion: APIVersion
    /// `status.token`: the bearer token kubectl sends to the API server.
    public var token: String
    /// `status.expirationTimestamp` (RFC 3339, UTC); `nil`: kubectl keeps the token until a 401.
    public var expiresAt: Date?

    /// An `ExecCredential` with `token`, in `apiVersion` (default v1).
    public init(token: String, expiresAt: Date?, apiVersion: APIVersion = .v1) {
        self.token = token
        self.expiresAt = expiresAt
        self.apiVersion = apiVersion
    }

    /// The answer to the kubectl that sent `info`: in the version it asked for, v1 when it named none.
    public init(token: String, expiresAt: Date?, answering info: ExecInfo) {
        self.init(token: token, expiresAt: expiresAt, apiVersion: info.apiVersion ?? .v1)
    }

    /// The document as kubectl reads it from the plugin's standard output: one line of JSON,
    /// `{"apiVersion":…,"kind":"ExecCredential","status":{"token":…,"expirationTimestamp":…}}`.
    public func serialized() -> String {
        var status: JSONObject = ["token": .string(token)]
        if let expiresAt { status["expirationTimestamp"] = .string(ISO8601.string(from: expiresAt)) }
        let document: JSONObject = [
            "apiVersion": .string(apiVersion.rawValue), "kind": .string("ExecCredential"), "status": .object(status)
        ]
        return JSONValue.object(document).serialized()
    }

    /// The version and expiry; never the token.
    public var description: String {
        "ExecCredential(\(apiVersion.rawValue), expires \(expiresAt.map { ISO8601.string(from: $0) } ?? "never said"), token redacted)"
    }
}
